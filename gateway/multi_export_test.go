package gateway

// SetMuxBatchHook makes every multiplexed stream of s call f before it gathers each
// live batch.
func SetMuxBatchHook(s *Server, f func()) { s.muxBatchHook = f }
