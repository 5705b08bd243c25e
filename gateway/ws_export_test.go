package gateway

// SetWSBatchHook makes every WebSocket connection of s call f with its client id
// before it gathers each live batch.
func SetWSBatchHook(s *Server, f func(client string)) { s.wsBatchHook = f }

// SetWSHelloAfterReader makes every WebSocket connection of s wait for its reader
// to end before it looks at the hello.
func SetWSHelloAfterReader(s *Server) {
	s.wsBeforeHello = func(readDone <-chan struct{}) { <-readDone }
}

func SetWSWroteHook(s *Server, f func(client string)) { s.wsWroteHook = f }

func SetWSCorkedHook(s *Server, f func(client string)) { s.wsCorkedHook = f }
