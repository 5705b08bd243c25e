// Command gateway runs one roomcast pod: SSE room streams and HTTP publishing on the
// public listener, metrics, stats and drain on the admin listener.
//
// With no --redis it runs on the embedded in-memory log and is a complete product on
// its own: go run ./cmd/gateway.
//
// On a terminal it starts with a short summary for a person (its pages, its log, what
// anonymous clients may do) and logs in slog's text form; elsewhere, or with
// --log-format json, its log is JSON, one object a line. A first SIGINT or SIGTERM
// drains; a second stops at once.
//
// Exit codes: 0 after a clean drain, 1 on a runtime failure, 2 on bad configuration,
// which is always one line on stderr: "gateway: " and what is wrong.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseConfig(args, environ, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = cfg.checkRelations()
	}
	if err != nil {
		return refuse(err)
	}
	cfg.Cmdline = redactArgs(append([]string{os.Args[0]}, args...))
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return refuse(fmt.Errorf("--log-level: %w", err))
	}
	text := cfg.textLog(isTerminal(os.Stderr))
	logger := newLogger(os.Stderr, level, text)
	slog.SetDefault(logger)

	p, err := build(cfg, logger)
	if err != nil {
		return refuse(err)
	}
	p.text = text
	return p.serve(logger)
}

// refuse reports a configuration error in the one form every one takes, whatever
// the log format: "gateway: " and the message on stderr, and exit code 2.
func refuse(err error) int {
	fmt.Fprintln(os.Stderr, "gateway:", err)
	return 2
}

// pod is one wired gateway process.
type pod struct {
	cfg    config
	log    replay.Log
	podID  *podIDLease // this process's claim of its pod id (podid.go)
	rooms  *rooms.Registry
	drain  *drain.Drainer
	server *gateway.Server
	auth   *auth.Authenticator
	occ    *rooms.Reporter
	// text: the start-up and the stop are written for a person (see announce).
	text bool
}

func build(cfg config, logger *slog.Logger) (*pod, error) {
	log, err := openLog(cfg, logger)
	if err != nil {
		return nil, err
	}
	// Whatever is open when a later step fails is closed again.
	p := &pod{cfg: cfg, log: log}
	fail := func(err error) (*pod, error) {
		p.closeAll(logger)
		return nil, err
	}
	// The control plane on the log's backend: the fleet's in Redis (one client with
	// the log), the pod's own in memory.
	ctl, ok := replay.ControlOf(log)
	if !ok {
		return fail(errors.New("the log keeps no control plane"))
	}
	if p.podID, err = claimPodID(cfg, ctl, logger); err != nil {
		return fail(err)
	}
	reg, err := rooms.New(log, log, rooms.Config{
		Queue:      cfg.Queue,
		QueueBytes: int64(cfg.QueueBytes),
		// --max-queued-bytes 0 means no limit, as does the registry's zero.
		MaxQueuedBytes: int64(cfg.MaxQueuedBytes),
		Linger:         lingerFor(cfg.Linger),
		// A room's first resume reads its latest events back from the log: no
		// further than the log keeps.
		Recent:         min(1024, cfg.History),
		MaxRecentBytes: recentFor(cfg.RecentBytes),
		Policy:         cfg.RoomPolicies.For,
		Logger:         logger,
	})
	if err != nil {
		return fail(err)
	}
	p.rooms = reg
	// A drain paces and sheds connections, however many rooms each follows.
	conns := gateway.NewConnections(reg)
	dr, err := drain.New(conns, drain.Config{
		Delay: cfg.DrainDelay, Window: cfg.DrainWindow, Timeout: cfg.DrainTimeout, Logger: logger,
	})
	if err != nil {
		return fail(err)
	}
	p.drain = dr
	access, err := newAuthenticator(cfg, ctl, logger)
	if err != nil {
		return fail(err)
	}
	p.auth = access
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(gateway.GoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	idleLoop, _ := gateway.ParseIdleLoop(cfg.IdleLoop) // checked with the flags
	srv, err := gateway.New(log, reg, dr, gateway.Config{
		RetryMin:     cfg.RetryMin,
		RetryMax:     cfg.RetryMax,
		Heartbeat:    cfg.Heartbeat,
		WriteTimeout: cfg.WriteTimeout,
		MaxBody:      int64(cfg.MaxBody),
		MaxTTL:       cfg.HistoryTTL,
		MaxBatchBody: int64(cfg.MaxBatchBody),
		BodyTimeout:  cfg.BodyTimeout, MaxConnsPerIP: cfg.MaxConnsPerIP,
		Auth: access, MaxTokenAge: cfg.Auth.MaxTokenAge, MaxAnonymousRooms: cfg.Auth.MaxAnonymousRooms, MaxAnonymousRoomsPerIP: cfg.Auth.MaxAnonymousRoomsPerIP,
		AcceptRate: cfg.AcceptRate, AcceptBurst: cfg.AcceptBurst,
		MaxStreams: cfg.MaxStreams, MaxStreamsPerIP: cfg.MaxStreamsPerIP, ClientIPHeader: cfg.ClientIPHeader, LoopbackUncapped: true,
		WSPing: cfg.WSPing, WSPongTimeout: cfg.WSPongTimeout, WSRate: cfg.WSRate, WSBurst: cfg.WSBurst,
		MaxStreamsPerUser: cfg.MaxStreamsPerUser,
		MaxRoomsPerStream: cfg.MaxRoomsPerStream, AllowOrigins: cfg.allowOrigins(), PublicHosts: cfg.PublicHosts, AdminToken: cfg.AdminToken, MetricsApart: cfg.MetricsAddr != "", PodID: cfg.podID(), Cmdline: cfg.Cmdline,
		Owners: ctl.Owners, Notices: ctl.Notices, Occupancy: ctl.Occupancy, Streams: ctl.Streams,
		Rebalance:   gateway.Rebalance{On: cfg.Rebalance, Margin: cfg.RebalanceMargin, Rate: cfg.RebalanceRate, Interval: cfg.OccupancyInterval},
		IdleLoop:    idleLoop,
		Connections: conns,
		Registry:    metrics,
		Logger:      logger,
	})
	if err != nil {
		return fail(err)
	}
	p.server = srv
	if p.occ, err = rooms.NewReporter(reg, ctl.Occupancy, rooms.ReporterConfig{
		Pod: cfg.podID(), Interval: cfg.OccupancyInterval, Logger: logger,
	}); err != nil {
		return fail(err)
	}
	access.Start()
	return p, nil
}

// openLog returns the shared Redis log with --redis, else the embedded memory log.
// A Redis that cannot be reached is no error: the pod starts, serves streams a
// longer retry: and publishes 503, and connects when Redis comes up (a pod that
// exited instead would crash-loop with every other pod while Redis blips). Only a
// bad configuration fails.
func openLog(cfg config, logger *slog.Logger) (replay.Log, error) {
	if cfg.Redis == "" {
		return replay.NewMemoryLog(replay.MemoryConfig{
			History:    cfg.History,
			HistoryTTL: cfg.HistoryTTL,
			MaxRooms:   cfg.MaxRooms,
			MaxBytes:   int64(cfg.MaxHistoryBytes),
		})
	}
	target, tlsCfg, err := redisConnection(cfg)
	if err != nil {
		return nil, err
	}
	hot, err := cfg.Hot.redis()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return replay.NewRedisLog(ctx, replay.RedisConfig{
		Addrs:        target.addrs,
		Username:     target.username,
		Password:     target.password,
		TLS:          tlsCfg,
		History:      cfg.History,
		HistoryTTL:   cfg.HistoryTTL,
		WaitReplicas: cfg.PublishWaitReplicas,
		Timeout:      cfg.RedisTimeout,
		Logger:       logger,

		ClientsInterval: cfg.RedisSampleInterval,
		HotRooms:        hot.HotRooms,
		HotPartitions:   hot.HotPartitions,
		PodID:           hot.PodID,
	})
}

func (p *pod) serve(logger *slog.Logger) int {
	// Signals are caught before anything is announced: a SIGTERM from then on drains.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	// A listener that cannot open is a configuration problem: exit 2.
	public, err := listen("addr", p.cfg.Addr)
	if err != nil {
		p.closeAll(logger)
		return refuse(err)
	}
	admin, err := listen("admin-addr", p.cfg.AdminAddr)
	if err != nil {
		public.Close()
		p.closeAll(logger)
		return refuse(err)
	}
	listeners := []net.Listener{p.server.LimitListener(public), admin}
	servers := []*http.Server{newHTTPServer(p.server.Public(), logger), newHTTPServer(p.server.Admin(), logger)}
	servers[0].ConnContext = p.server.ConnContext
	started := []any{"addr", public.Addr().String(), "admin_addr", admin.Addr().String()}
	var metricsAddr net.Addr
	if p.cfg.MetricsAddr != "" {
		m, err := listen("metrics-addr", p.cfg.MetricsAddr)
		if err != nil {
			public.Close()
			admin.Close()
			p.closeAll(logger)
			return refuse(err)
		}
		listeners = append(listeners, m)
		servers = append(servers, newHTTPServer(p.server.Metrics(), logger))
		started = append(started, "metrics_addr", m.Addr().String())
		metricsAddr = m.Addr()
	}
	failed := make(chan error, len(listeners))
	for i, l := range listeners {
		go func() {
			if err := servers[i].Serve(l); !errors.Is(err, http.ErrServerClosed) {
				failed <- err
			}
		}()
	}
	// Notices from other pods that took over one of this pod's WebSocket clients; they
	// end with the log.
	watch, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go func() {
		if err := p.server.WatchOwners(watch); err != nil && !errors.Is(err, replay.ErrClosed) {
			logger.Warn("WebSocket ownership notices stopped: a displaced client is closed at its next refresh", "err", err)
		}
	}()
	// The pod's open connections for the fleet, and with --rebalance its share of
	// them; it stops, and forgets the pod's record, once the drain has finished.
	rebalance, stopRebalance := context.WithCancel(context.Background())
	rebalanced := make(chan struct{})
	go func() {
		defer close(rebalanced)
		_ = p.server.Rebalance(rebalance)
	}()
	if p.text {
		// For a person: a short summary; every setting in effect at debug level.
		p.cfg.announce(os.Stderr, public.Addr(), admin.Addr(), metricsAddr)
		logger.Debug("settings in effect", append(append(started, "log", logKind(p.cfg)), p.cfg.effective()...)...)
	} else {
		logger.Info("roomcast gateway started", append(append(started, "log", logKind(p.cfg)), p.cfg.effective()...)...)
		for _, w := range p.cfg.warnings(admin.Addr()) {
			logger.Warn(w.full)
		}
	}

	code := 0
	select {
	case sig := <-signals:
		if p.text {
			fmt.Fprint(os.Stderr, p.cfg.drainingNote(signalName(sig)))
		} else {
			logger.Info("signal received: draining", "signal", sig.String(),
				"drain_delay", fmtDuration(p.cfg.DrainDelay), "drain_window", fmtDuration(p.cfg.DrainWindow),
				"second_signal", "stops at once")
		}
		p.drain.Start()
	case <-p.drain.Done():
	case err := <-failed:
		logger.Error("listener failed", "err", err)
		code = 1
		p.drain.Force()
	}
	for done := false; !done; {
		select {
		case sig := <-signals:
			if p.text {
				fmt.Fprintf(os.Stderr, "%s again: closing every stream now\n", signalName(sig))
			} else {
				logger.Warn("second signal: closing every stream now", "signal", sig.String())
			}
			p.drain.Force()
		case <-p.drain.Done():
			done = true
		}
	}

	stopRebalance()
	<-rebalanced
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil {
			_ = s.Close()
		}
	}
	p.close(ctx, logger)
	if p.text {
		fmt.Fprintf(os.Stderr, "roomcast gateway stopped (exit code %d)\n", code)
	} else {
		logger.Info("roomcast gateway stopped", "exit_code", code)
	}
	return code
}

// listen opens the listener of --flag on addr; its error names the flag and, for
// an address in use, says so plainly.
func listen(flag, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("--%s %s: the address is in use (another gateway, or another program, listens there): stop it or choose another port", flag, addr)
	case err != nil:
		return nil, fmt.Errorf("--%s %s: %w", flag, addr, err)
	}
	return l, nil
}

// signalName is how a person knows a signal: Ctrl-C for SIGINT.
func signalName(sig os.Signal) string {
	if sig == syscall.SIGINT {
		return "Ctrl-C"
	}
	return sig.String()
}

// close releases the registry, access control and the log.
func (p *pod) close(ctx context.Context, logger *slog.Logger) {
	if p.auth != nil {
		p.auth.Close()
	}
	if p.occ != nil {
		if err := p.occ.Close(ctx); err != nil {
			logger.Warn("forgetting the pod's occupancy records", "err", err)
		}
	}
	if p.rooms != nil {
		if err := p.rooms.Close(ctx); err != nil {
			logger.Warn("closing rooms", "err", err)
		}
	}
	p.podID.release(ctx)
	if err := p.log.Close(ctx); err != nil {
		logger.Warn("closing the log", "err", err)
	}
}

// closeAll is close for a pod that never started serving.
func (p *pod) closeAll(logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.close(ctx, logger)
}

// recentFor maps --recent-bytes to rooms.Config.MaxRecentBytes, whose zero means the
// default: --recent-bytes 0 keeps no events.
func recentFor(n byteSize) int64 {
	if n == 0 {
		return -1
	}
	return int64(n)
}

// lingerFor maps --linger to rooms.Config.Linger, whose zero means the default:
// --linger 0 means no linger at all.
func lingerFor(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func logKind(cfg config) string {
	if cfg.Redis != "" {
		return "redis"
	}
	return "memory"
}

func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// WriteTimeout stays 0: streams set a deadline per write.
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
