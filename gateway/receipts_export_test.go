package gateway

// TakeReceiptWaiters takes every place of the pod's publishes waiting for
// receipts; release gives them back.
func TakeReceiptWaiters(s *Server) (release func()) {
	var ids []uint64
	for {
		id, _, ok := s.receipts.waiter()
		if !ok {
			break
		}
		ids = append(ids, id)
	}
	return func() {
		for _, id := range ids {
			s.receipts.done("", id)
		}
	}
}
