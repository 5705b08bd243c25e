package gateway

import "net"

// TrackedAddrs is how many peer addresses a listener from LimitListener holds counts for.
func TrackedAddrs(l net.Listener) int {
	cl, ok := l.(*connLimiter)
	if !ok {
		return -1
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.byIP)
}
