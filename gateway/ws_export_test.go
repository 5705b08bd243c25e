package gateway

// SetWSBatchHook makes every WebSocket connection of s call f with its client id
// before it gathers each live batch.
func SetWSBatchHook(s *Server, f func(client string)) { s.wsBatchHook = f }
