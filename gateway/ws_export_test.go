package gateway

// SetWSBatchHook makes every connection of s call f with its client id before it
// gathers each live batch.
func SetWSBatchHook(s *Server, f func(client string)) {
	setHook(s, func(h *connHooks) { h.batch = func(c *conn) { f(clientOf(c)) } })
}

// SetWSHelloAfterReader makes every WebSocket connection of s wait for its reader
// to end before it looks at the hello.
func SetWSHelloAfterReader(s *Server) {
	setHook(s, func(h *connHooks) { h.beforeHello = func(readDone <-chan struct{}) { <-readDone } })
}

// SetWSWroteHook makes every connection of s call f with its client id after it
// wrote a live batch of events.
func SetWSWroteHook(s *Server, f func(client string)) {
	setHook(s, func(h *connHooks) { h.wrote = func(c *conn) { f(clientOf(c)) } })
}

// SetWSCorkedHook makes every WebSocket connection of s call f with its client id
// once a batch of several frames is corked.
func SetWSCorkedHook(s *Server, f func(client string)) {
	setHook(s, func(h *connHooks) { h.corked = func(c *conn) { f(clientOf(c)) } })
}
