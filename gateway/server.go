package gateway

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
	"github.com/roomcast/roomcast/web"
)

// Server serves roomcast's public and admin listeners.
type Server struct {
	log   replay.Log
	rooms *rooms.Registry
	drain *drain.Drainer
	cfg   Config
	m     *metrics
	edgeM *edgeMetrics

	hostPolicy hostPolicy // the Host headers the listeners answer

	admission *admission

	auth          *auth.Authenticator
	sessions      *sessions
	ticketsIssued atomic.Uint64
	refusedCounts [len(refusedKinds)]atomic.Uint64
	started       time.Time
	writeDrops    atomic.Uint64 // streams whose failed write closed them first
	connects      counterRate   // of roomcast_streams_opened_total, both children
	resumes       counterRate   // of its resumed="true" child

	conns *Connections // every open connection, the drain's target
	loop  *loop        // the event-loop workers idle connections wait on; nil: --idle-loop off

	owners     clientOwners        // who owns each WebSocket client id (Config.Owners)
	notices    podNotices          // close notices between pods (Config.Notices)
	occupancy  roomOccupancy       // the fleet's records of who holds each room; nil: none
	streams    replay.FleetStreams // the fleet's records of each pod's open connections; nil: none
	rebalanceM *rebalanceMetrics
	wsMu       sync.Mutex             // guards wsByClient and wsClaims
	wsByClient map[string]*wsConn     // the pod's WebSocket connections by client id
	wsClaims   map[string]*claimTurn  // the claims of each client id in progress on the pod
	wsOpen     atomic.Int64           // open WebSocket connections
	wsClosed   *prometheus.CounterVec // WebSocket closes by code
	receipts   *receipts              // clients' acks and the publishes waiting for them
	// wsRateLimited counts WebSocket messages over their connection's rate limit,
	// by what came of them.
	wsRateLimited *prometheus.CounterVec
	users         *userCap // streams and connections per user (sub)
}

// New returns a Server over the log, the room registry and the drain lifecycle, and
// registers its metrics on cfg.Registry.
func New(log replay.Log, reg *rooms.Registry, dr *drain.Drainer, cfg Config) (*Server, error) {
	if log == nil || reg == nil || dr == nil {
		return nil, errors.New("gateway: log, registry and drainer are required")
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Server{log: log, rooms: reg, drain: dr, cfg: cfg, started: time.Now(), admission: newAdmission(cfg), users: newUserCap(cfg.MaxStreamsPerUser),
		auth: cfg.Auth, sessions: newSessions(cfg.MaxAnonymousRooms, cfg.MaxAnonymousRoomsPerIP), owners: cfg.Owners, wsByClient: map[string]*wsConn{},
		wsClaims: map[string]*claimTurn{}, conns: cfg.Connections, hostPolicy: newHostPolicy(cfg.PublicHosts)}
	if s.conns == nil {
		s.conns = NewConnections(reg)
	}
	if cfg.IdleLoop == IdleLoopOn {
		s.loop = newLoop(s)
	}
	// What Config leaves out comes from the log's control plane: the fleet's in
	// Redis, the pod's own in memory.
	ctl, _ := replay.ControlOf(log)
	if s.owners == nil {
		if ctl.Owners == nil {
			return nil, errors.New("gateway: the log keeps no WebSocket client registry (replay.Owners): set Config.Owners")
		}
		s.owners = ctl.Owners
	}
	if s.notices = cfg.Notices; s.notices == nil {
		if ctl.Notices == nil {
			return nil, errors.New("gateway: the log carries no pod notices (replay.Notices): set Config.Notices")
		}
		s.notices = ctl.Notices
	}
	s.receipts = newReceipts(s, ctl.Receipts)
	if s.occupancy = cfg.Occupancy; s.occupancy == nil && ctl.Occupancy != nil {
		s.occupancy = ctl.Occupancy
	}
	if s.streams = cfg.Streams; s.streams == nil {
		s.streams = ctl.Streams
	}
	if s.auth == nil {
		var keys []string
		if cfg.PublishToken != "" {
			keys = []string{cfg.PublishToken}
		}
		ac := auth.Config{PublishKeys: keys, Logger: cfg.Logger}
		// Revocations stay pod-local: watching the log's would need a Close.
		if ac.Tickets = cfg.Tickets; ac.Tickets == nil {
			ac.Tickets = ctl.Tickets
		}
		a, err := auth.New(ac)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		s.auth = a
	}
	s.auth.OnRevoke(func(rev replay.Revocation) { s.sessions.revoke(rev) })
	m, err := newMetrics(cfg.Registry, s)
	if err != nil {
		return nil, err
	}
	s.m = m
	s.connects.read = func() float64 { return value(m.opened) + value(m.resumed) }
	s.resumes.read = func() float64 { return value(m.resumed) }
	if err := registerRecentMetrics(cfg.Registry, s); err != nil {
		return nil, err
	}
	if s.edgeM, err = newEdgeMetrics(cfg.Registry); err != nil {
		return nil, err
	}
	if err := s.registerWSMetrics(cfg.Registry); err != nil {
		return nil, err
	}
	if s.rebalanceM, err = newRebalanceMetrics(cfg.Registry); err != nil {
		return nil, err
	}
	return s, nil
}

// Public is the handler of the public listener: room streams and publishing,
// /healthz, /readyz, /openapi.yaml and the web pages. Admin routes are never on it.
func (s *Server) Public() http.Handler {
	return s.hosts(s.cors(s.edge(s.publicRouter(), s.trustedOrigins()...)))
}

// publicRouter is the public listener's router, before the edge's checks; its
// routes are the ones openapi.yaml describes.
func (s *Server) publicRouter() *chi.Mux {
	pages := web.Public()
	r := chi.NewRouter()
	r.Use(middleware.GetHead)
	r.MethodNotAllowed(methodNotAllowed(pages))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	r.Get("/openapi.yaml", openAPI)
	r.Get("/rooms/{room}/events", uncounted(s.stream))
	r.Head("/rooms/{room}/events", s.streamHead)
	r.Post("/rooms/{room}/events", s.publish)
	r.Post("/events", s.publishBatch)
	r.Get("/events", uncounted(s.multiStream))
	r.Head("/events", s.muxHead)
	r.Get("/ws", uncounted(s.websocket))
	r.Post("/tickets", s.issueTicket)
	r.Get("/clients/{id}", s.clientRoute)
	r.NotFound(pages.ServeHTTP)
	return r
}

// Admin is the handler of the admin listener: /metrics, /admin/stats, /admin/drain,
// /admin/shed, /admin/rooms, pprof and the operator page.
func (s *Server) Admin() http.Handler {
	return s.hosts(s.edge(s.adminGuard(s.adminRouter())))
}

// adminRouter is the admin listener's router, before the edge's checks and the
// admin token's guard; its routes are the ones openapi.yaml describes.
func (s *Server) adminRouter() *chi.Mux {
	pages := web.Admin()
	r := chi.NewRouter()
	r.Use(middleware.GetHead)
	r.MethodNotAllowed(methodNotAllowed(pages))
	if !s.cfg.MetricsApart {
		r.Handle("/metrics", s.metricsHandler())
	}
	r.Get("/admin/stats", s.stats)
	r.Post("/admin/drain", s.startDrain)
	r.Post("/admin/shed", s.shed)
	r.Post("/admin/revoke", s.revoke)
	s.occupancyRoutes(r)
	r.Get("/admin/clients/{id}", s.adminClient)
	r.Post("/admin/clients/{id}/close", s.adminClientClose)
	r.HandleFunc("/debug/pprof/*", pprof.Index)
	r.HandleFunc("/debug/pprof/cmdline", s.cmdline)
	r.HandleFunc("/debug/pprof/profile", pprof.Profile)
	r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	r.HandleFunc("/debug/pprof/trace", pprof.Trace)
	r.NotFound(pages.ServeHTTP)
	return r
}

// cmdline is net/http/pprof's Cmdline over Config.Cmdline, whose secrets are
// replaced, instead of os.Args.
func (s *Server) cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, strings.Join(s.cfg.Cmdline, "\x00"))
}

// readyz follows the drain lifecycle only, never the backend (see healthReporter).
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if !s.drain.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": s.drain.State().String()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// retryMillis draws a retry hint uniformly in [lo, hi].
func retryMillis(lo, hi time.Duration) int64 {
	a, b := lo.Milliseconds(), hi.Milliseconds()
	if b <= a {
		return a
	}
	return a + rand.Int64N(b-a+1)
}
