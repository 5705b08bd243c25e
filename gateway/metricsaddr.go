package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the handler of a listener that serves /metrics alone (Config.MetricsApart):
// Prometheus can then be admitted to it without reaching the admin routes.
func (s *Server) Metrics() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.GetHead)
	r.Handle("/metrics", s.metricsHandler())
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { writeError(w, errNotFound) })
	return s.hosts(s.edge(r))
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})
}
