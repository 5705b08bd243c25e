package gateway

import "sync"

// SetMuxBatchHook makes every connection of s call f before it gathers each live
// batch.
func SetMuxBatchHook(s *Server, f func()) {
	setHook(s, func(h *connHooks) { h.batch = func(*conn) { f() } })
}

// SetLoopClosedHook makes s call f with a connection's remote address once the idle
// loop closed its socket: net/http's ConnState no longer sees a connection the
// loop took.
func SetLoopClosedHook(s *Server, f func(remote string)) {
	setHook(s, func(h *connHooks) { h.closed, h.peers = f, &sync.Map{} })
}

// ClearHooks drops every hook of s.
func ClearHooks(s *Server) { testHooks.Delete(s) }

// setHook changes s's hooks with set.
func setHook(s *Server, set func(*connHooks)) {
	h := &connHooks{}
	if old := s.hooks(); old != nil {
		*h = *old
	}
	set(h)
	testHooks.Store(s, h)
}

// clientOf is the client id of a WebSocket connection; "" for a stream.
func clientOf(c *conn) string {
	switch t := c.t.(type) {
	case *wsConn:
		return t.client
	case wsLoopConn:
		return t.client
	}
	return ""
}
