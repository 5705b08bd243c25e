package gateway

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// edgeMetrics count what the HTTP edge refuses before a handler runs.
type edgeMetrics struct {
	crossOrigin prometheus.Counter
}

func newEdgeMetrics(reg prometheus.Registerer) (*edgeMetrics, error) {
	m := &edgeMetrics{
		crossOrigin: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_cross_origin_refused_total",
			Help: "State-changing requests refused because a browser marked them cross-origin and they carried no bearer credential.",
		}),
	}
	for _, c := range []prometheus.Collector{m.crossOrigin} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var errCrossOrigin = newError(http.StatusForbidden, "cross_origin",
	"a browser marked this request cross-origin: state-changing requests from another origin need Authorization: Bearer <token>")

// edge wraps a listener's router with the checks every request passes first.
func (s *Server) edge(h http.Handler) http.Handler {
	return s.crossOrigin(h)
}

// crossOrigin refuses state-changing requests (anything but GET, HEAD and OPTIONS)
// that a browser marks as coming from another origin (Sec-Fetch-Site, else an Origin
// that is not the Host), unless they carry a bearer credential: a page on another
// origin can send a text/plain POST or a form to a loopback gateway without any
// preflight, but it cannot attach a bearer token without a CORS preflight, which the
// gateway never grants. Other schemes do not count: a browser resends Basic
// credentials on its own. Requests without either header (same-origin pages of old
// browsers, clients that are not browsers) pass.
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.edgeM.crossOrigin.Inc()
		writeError(w, errCrossOrigin)
	}))
	protected := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBearer(r) {
			next.ServeHTTP(w, r)
			return
		}
		protected.ServeHTTP(w, r)
	})
}

func hasBearer(r *http.Request) bool {
	scheme, _, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer")
}
