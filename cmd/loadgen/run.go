package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// room is one room under load.
type room struct {
	name       string
	streamURL  string // on the first pod
	publishURL string // on the first pod
	streamPath string // the same, without the pod's base URL
	pubPath    string
	members    int
	wsMembers  int // of members, those that connect over WebSocket

	published atomic.Int64  // acknowledged publishes
	target    atomic.Uint64 // highest acknowledged seq
	final     atomic.Bool   // publishing is over: target no longer moves
}

// acknowledge records a publish the server answered with seq.
func (r *room) acknowledge(seq uint64) {
	r.published.Add(1)
	for {
		cur := r.target.Load()
		if seq <= cur || r.target.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// loadState is what the subscribers, the publishers and the progress line share.
type loadState struct {
	cfg       *Config
	subClient *http.Client
	measuring atomic.Bool

	open          atomic.Int64 // streams open now
	connectedOnce atomic.Int64 // subscribers that connected at least once
	connectErrors atomic.Int64
	reconnects    atomic.Int64
	allConnected  chan struct{}

	pods   *pods
	connMu sync.Mutex // guards the subscribers' connection fields and storm
	storm  stormState

	pendingSettle atomic.Int64
	settled       chan struct{}
}

func (ls *loadState) markConnected() {
	if ls.connectedOnce.Add(1) == int64(ls.cfg.Subs) {
		close(ls.allConnected)
	}
}

func (ls *loadState) markCaughtUp() {
	if ls.pendingSettle.Add(-1) == 0 {
		close(ls.settled)
	}
}

// window is a measured interval with the counters at both ends.
type window struct {
	start, end               time.Time
	deliveries0, deliveries1 uint64
	publishes0, publishes1   int64
	bytes0, bytes1           uint64
	wsDeliveries0            uint64 // of deliveries0, the WebSocket subscribers'
	wsDeliveries1            uint64
	open                     int64 // streams open at the end
	timeline                 []TimelinePoint
	storm                    *StormResult
	drains                   []DrainResult
	chaos                    *ChaosResult
	rebalance                *RebalanceResult
}

// run drives one load run: connect the subscribers, hold them (idle) or publish
// through warm-up and the measured window, let deliveries settle, and report. It
// returns early, with what it measured, when ctx is done.
func run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	return runWith(ctx, cfg, progress, false)
}

// runWith is run with the progress bar on or off.
func runWith(ctx context.Context, cfg Config, progress io.Writer, bar bool) (*Report, error) {
	rooms, err := makeRooms(&cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.URLs) == 0 {
		cfg.URLs = []string{cfg.URL}
	}
	ls := &loadState{
		cfg:          &cfg,
		subClient:    &http.Client{Transport: newTransport(0)},
		allConnected: make(chan struct{}),
		settled:      make(chan struct{}),
		pods:         newPods(cfg.URLs),
	}
	if cfg.Scenario == scenarioRebalance {
		// The last pod joins empty at the start of the measured window.
		ls.pods.joiner = len(cfg.URLs) - 1
		ls.pods.out[len(cfg.URLs)-1].Store(true)
	}
	if cfg.Subs == 0 {
		close(ls.allConnected)
	}
	subs := make([]*subscriber, cfg.Subs)
	runID := newRunID()
	// The last -mux-streams × -mux-rooms subscribers are the members of the
	// multiplexed streams: stream j follows rooms j×K … j×K+K-1 (mod the rooms).
	plain := cfg.Subs - cfg.MuxStreams*cfg.MuxRooms
	for i := range subs {
		r := rooms[i%len(rooms)]
		if i >= plain {
			r = rooms[(i-plain)%len(rooms)]
		}
		r.members++
		subs[i] = &subscriber{id: i, room: r}
		if i < plain && cfg.wsMember(i) {
			r.wsMembers++
			subs[i].ws = newWSState(runID, i, r.name)
		}
		if cfg.Protocol == protocolCentrifugo && len(cfg.TokenSecret) > 0 {
			if subs[i].token, err = centrifugoToken(cfg.TokenSecret, i, r.name, time.Now()); err != nil {
				return nil, err
			}
		}
		if !cfg.Idle {
			subs[i].hist = new(histogram)
		}
	}
	for j := range cfg.MuxStreams {
		newMuxStream(j, subs[plain+j*cfg.MuxRooms:plain+(j+1)*cfg.MuxRooms])
	}
	ls.pendingSettle.Store(int64(len(subs)))
	if len(subs) == 0 {
		close(ls.settled)
	}

	rep := &Report{Scenario: cfg.Scenario, Pods: len(cfg.URLs), Subscribers: cfg.Subs, Idle: cfg.Idle, Timeline: []TimelinePoint{}}
	var rssBefore int64
	if cfg.PID > 0 {
		if rssBefore, err = readRSS(cfg.PID); err != nil {
			return nil, err
		}
	}
	admin := &http.Client{Transport: newTransport(0)}
	defer admin.CloseIdleConnections()
	if cfg.MetricsURL != "" {
		if rep.GoroutinesBefore, err = readGoroutines(ctx, admin, cfg.MetricsURL); err != nil {
			return nil, err
		}
	}

	defer ls.subClient.CloseIdleConnections()
	pubs := newPublishers(&cfg, &http.Client{Transport: newTransport(cfg.Publishers)}, rooms)
	pubs.pods = ls.pods
	defer pubs.client.CloseIdleConnections()
	pr := startProgress(progress, bar, ls, subs, pubs)
	defer pr.stop()

	subCtx, cancelSubs := context.WithCancel(ctx)
	defer cancelSubs()
	var wg sync.WaitGroup
	wg.Go(func() { launch(subCtx, &wg, ls, subs) })

	connectStart := time.Now()
	if waitFor(ctx, ls.allConnected, cfg.ConnectTimeout) {
		rep.ConnectSeconds = time.Since(connectStart).Seconds()
	}
	// serverRSS reads the server's RSS for record, when a -pid is given.
	serverRSS := func(record func(kib int64)) error {
		if cfg.PID <= 0 || ctx.Err() != nil {
			return nil
		}
		kib, err := readRSS(cfg.PID)
		if err != nil {
			cancelSubs()
			wg.Wait()
			return err
		}
		record(kib)
		return nil
	}
	if err := serverRSS(func(after int64) { rep.measureRSS(rssBefore, after, ls.open.Load()) }); err != nil {
		return nil, err
	}

	var w window
	if cfg.Idle {
		waitFor(ctx, nil, cfg.Duration)
		w.open = ls.open.Load()
		if err := serverRSS(func(held int64) { rep.measureHeldRSS(held, w.open) }); err != nil {
			return nil, err
		}
	}
	// The plateau: every connection is up (and, with -idle, has been held idle).
	if err := rep.countGoroutines(ctx, &cfg, admin); err != nil {
		cancelSubs()
		wg.Wait()
		return nil, err
	}
	if !cfg.Idle {
		w = publish(ctx, ls, pubs, subs, pr, admin)
	}
	cancelSubs()
	wg.Wait()
	pr.stop()

	rep.fill(&cfg, ls, subs, rooms, pubs, w)
	return rep, nil
}

// publish runs warm-up, the measured window and the settle phase.
func publish(ctx context.Context, ls *loadState, pubs *publishers, subs []*subscriber, pr *progressPrinter, admin *http.Client) window {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pubs.run(ctx, stop)
	}()

	var w window
	// One pass gives the total and the WebSocket part of the same moment, so the SSE
	// part (their difference) never runs below zero.
	snapshot := func() (time.Time, uint64, uint64, int64) {
		sse, ws := sumDeliveriesBy(subs)
		return time.Now(), sse + ws, ws, sumPublished(pubs.rooms)
	}
	waitFor(ctx, done, ls.cfg.Warmup)
	ls.measuring.Store(true)
	w.start, w.deliveries0, w.wsDeliveries0, w.publishes0 = snapshot()
	w.bytes0 = sumBytes(subs)
	pr.markMeasuring(w.start)

	// The scenario's action (a storm, the drains) runs inside the window, which
	// lasts until both -duration has passed and the action is over.
	actx, cancelAction := context.WithCancel(ctx)
	action := make(chan struct{})
	go func() {
		defer close(action)
		switch ls.cfg.Scenario {
		case scenarioStorm:
			w.storm = runStorm(actx, ls, subs, admin, w.start)
		case scenarioRollingDrain:
			w.drains = runRollingDrain(actx, ls, admin)
		case scenarioChaos:
			w.chaos = runChaos(actx, ls, subs, pubs.rooms, admin, w.start)
		case scenarioRebalance:
			w.rebalance = runRebalance(actx, ls, admin)
		}
	}()
	sm := newSampler(ls, subs, w.start)
	sm.run(ctx, w.start.Add(ls.cfg.Duration), action, done)
	cancelAction()
	<-action
	w.end, w.deliveries1, w.wsDeliveries1, w.publishes1 = snapshot()
	w.bytes1 = sumBytes(subs)
	w.timeline = sm.points
	w.open = ls.open.Load()
	close(stop)
	<-done

	// Everything acknowledged must now reach every member of its room.
	for _, r := range pubs.rooms {
		r.final.Store(true)
	}
	for _, s := range subs {
		s.checkCaughtUp(ls)
	}
	waitFor(ctx, ls.settled, ls.cfg.Settle)
	return w
}

// launch starts the subscribers, at most ConnectRate per second.
func launch(ctx context.Context, wg *sync.WaitGroup, ls *loadState, subs []*subscriber) {
	var interval time.Duration
	if ls.cfg.ConnectRate > 0 {
		interval = time.Duration(float64(time.Second) / ls.cfg.ConnectRate)
	}
	start := time.Now()
	for i, s := range subs {
		if interval > 0 {
			if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > time.Millisecond {
				if !waitFor(ctx, nil, wait) {
					return
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		wg.Go(func() { s.run(ctx, ls) })
	}
}

// waitFor waits until ch is closed (true), d has passed (false) or ctx is done
// (false). A nil ch waits for the time alone and reports true when it passed.
func waitFor(ctx context.Context, ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return ch == nil
	case <-ctx.Done():
		return false
	}
}

// makeRooms builds the rooms and their URLs.
func makeRooms(cfg *Config) ([]*room, error) {
	rooms := make([]*room, cfg.Rooms)
	for i := range rooms {
		name := cfg.roomName(i)
		esc := url.PathEscape(name)
		r := &room{
			name:       name,
			streamPath: "/rooms/" + esc + "/events",
			pubPath:    "/rooms/" + esc + "/events",
		}
		if cfg.Protocol == protocolCentrifugo {
			r.streamPath = "/connection/uni_sse"
			r.pubPath = "/api/publish"
		}
		if cfg.Type != "" && cfg.Batch == 1 {
			r.pubPath += "?type=" + url.QueryEscape(cfg.Type)
		}
		r.streamURL, r.publishURL = cfg.URL+r.streamPath, cfg.URL+r.pubPath
		rooms[i] = r
		if _, err := url.Parse(rooms[i].streamURL); err != nil {
			return nil, fmt.Errorf("room %q: %w", name, err)
		}
	}
	return rooms, nil
}

// newTransport returns an HTTP/1.1 transport; idle > 0 keeps that many connections
// for reuse (publishers), 0 keeps the default (streams hold their own connection).
func newTransport(idle int) *http.Transport {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		DisableCompression:    true,
		ResponseHeaderTimeout: 10 * time.Second,
		MaxIdleConns:          0,
	}
	if idle > 0 {
		t.MaxIdleConnsPerHost = idle
		t.MaxConnsPerHost = idle
	}
	return t
}

func sumDeliveries(subs []*subscriber) uint64 {
	var n uint64
	for _, s := range subs {
		n += s.deliveries.Load()
	}
	return n
}

func sumBytes(subs []*subscriber) uint64 {
	var n uint64
	for _, s := range subs {
		n += s.bytes.Load()
	}
	return n
}

func sumPublished(rooms []*room) int64 {
	var n int64
	for _, r := range rooms {
		n += r.published.Load()
	}
	return n
}
