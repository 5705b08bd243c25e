package gateway

import (
	"net"

	"github.com/go-chi/chi/v5"
)

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

// PublicRoutes and AdminRoutes are the listeners' routers, for walking their routes.
func (s *Server) PublicRoutes() chi.Routes { return s.publicRouter() }
func (s *Server) AdminRoutes() chi.Routes  { return s.adminRouter() }
