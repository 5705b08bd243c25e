package gateway

import "sync"

// connHooks let a test hold a server's connections at points of the delivery core
// (to let queues fill, to see a batch corked). They live outside the production
// types: a server has hooks only when a test set them (see export_test.go), and a
// connection looks them up once, when it goes live.
type connHooks struct {
	batch       func(c *conn)                  // before a live batch is gathered
	wrote       func(c *conn)                  // after a live batch of events was written
	corked      func(c *conn)                  // once a WebSocket batch of several frames is corked
	beforeHello func(readDone <-chan struct{}) // before a WebSocket connection waits for its hello
	closed      func(remote string)            // once the idle loop closed a connection's socket
	peers       *sync.Map                      // for closed: each loop connection's peer, by *conn
}

// testHooks holds the hooks of the servers a test set them for, by *Server.
var testHooks sync.Map

// hooks returns the server's hooks, or nil: always, outside tests.
func (s *Server) hooks() *connHooks {
	h, ok := testHooks.Load(s)
	if !ok {
		return nil
	}
	return h.(*connHooks)
}
