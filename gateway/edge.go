package gateway

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// edgeMetrics count what the HTTP edge refuses before a handler runs.
type edgeMetrics struct {
	crossOrigin  prometheus.Counter
	connsRefused prometheus.Counter
	adminRefused prometheus.Counter
	hostRefused  prometheus.Counter
}

func newEdgeMetrics(reg prometheus.Registerer) (*edgeMetrics, error) {
	m := &edgeMetrics{
		crossOrigin: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_cross_origin_refused_total",
			Help: "State-changing requests refused because a browser marked them cross-origin and they carried no bearer credential.",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_connections_refused_total",
			Help: "Connections closed at accept because their peer address held --max-conns-per-ip connections that are not streams.",
		}),
		adminRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_admin_unauthorized_total",
			Help: "Requests to /admin/ or /debug/ on the admin listener refused for a missing or wrong admin token.",
		}),
		hostRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_host_refused_total",
			Help: "Requests refused with 421 because their Host header names a host the gateway does not serve (--public-host).",
		}),
	}
	for _, c := range []prometheus.Collector{m.crossOrigin, m.connsRefused, m.adminRefused, m.hostRefused} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var errCrossOrigin = newError(http.StatusForbidden, "cross_origin",
	"a browser marked this request cross-origin: state-changing requests from another origin need Authorization: Bearer <token>")

// edge wraps a listener's router with the checks every request passes first;
// state-changing requests from the trusted origins pass the cross-origin check.
func (s *Server) edge(h http.Handler, trusted ...string) http.Handler {
	return s.bodies(s.crossOrigin(h, trusted))
}

// bodies bounds how long a request body may take and keeps a refused request from
// holding its connection.
//
// A request with a body gets a read deadline of now + BodyTimeout, per request
// rather than http.Server.ReadTimeout, which bounds every request, streams included,
// and answers nothing a client can read. net/http lifts the deadline itself once the
// body has been read to its end (its background read starts with none), so a slow
// log call after the body is not cut off.
//
// An answer sent before the body was read to its end carries Connection: close.
// Without it, net/http reads and discards up to 256 KiB of the unread body before it
// sends the answer, so a 401 to a client that trickles its body would wait for the
// body it refused.
func (s *Server) bodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
		b := &edgeBody{ReadCloser: r.Body}
		r.Body = b
		next.ServeHTTP(&edgeWriter{ResponseWriter: w, body: b}, r)
		if !b.eof.Load() {
			// The connection closes after this answer, but net/http would first
			// read what is left of the body, until the deadline: end that read now.
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// edgeBody notes when a request body has been read to its end.
type edgeBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *edgeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// edgeWriter closes the connection after an answer sent before the body's end.
type edgeWriter struct {
	http.ResponseWriter
	body        *edgeBody
	wroteHeader bool
}

func (w *edgeWriter) WriteHeader(code int) {
	if !w.wroteHeader && code >= 200 {
		w.wroteHeader = true
		if !w.body.eof.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *edgeWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *edgeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// crossOrigin refuses state-changing requests (anything but GET, HEAD and OPTIONS)
// that a browser marks as coming from another origin (Sec-Fetch-Site, else an Origin
// that is not the Host), unless they carry a bearer credential: a page on another
// origin can send a text/plain POST or a form to a loopback gateway without any
// preflight, but it cannot attach a bearer token without a CORS preflight, which the
// gateway grants only to the --allow-origin origins (and then the token is checked
// like any other). Other schemes do not count: a browser resends Basic
// credentials on its own. Requests without either header (same-origin pages of old
// browsers, clients that are not browsers) pass, as do requests from the trusted
// origins (--allow-origin), whose pages may publish with the browser's own
// credentials.
func (s *Server) crossOrigin(next http.Handler, trusted []string) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range trusted {
		_ = cop.AddTrustedOrigin(o) // CheckOrigins accepted only what it takes
	}
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
