package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// This file holds the harness of the rollout tests: gateway processes with their
// logs kept, a load balancer in front of them, resuming SSE subscribers that check
// what they receive, and publishers that retry until acknowledged.

// podHeader is the response header the test balancer adds to name the pod that
// answered.
const podHeader = "X-Test-Pod"

// gatewayPod is one gateway process (gatewaytest.Process) with the figures of its
// drain that a rollout test reads from its log.
type gatewayPod struct {
	*gatewaytest.Process
	name          string
	public, admin string

	mu           sync.Mutex
	drainSeconds float64   // from the pod's "drain finished" line
	drainedAt    time.Time // the time of that line
	stoppedAt    time.Time // the time of the "roomcast gateway stopped" line
}

// launchPod starts a gateway process on kernel-chosen ports and waits for its
// start-up line. It is safe to call from any goroutine.
func launchPod(name string, args ...string) (*gatewayPod, error) {
	p := &gatewayPod{name: name}
	proc, err := gatewaytest.Launch(gatewaytest.Options{
		Name: "pod " + name, Bin: os.Args[0], Env: []string{"ROOMCAST_TEST_MAIN=1"}, Args: args,
		OnLog: p.logLine,
	})
	if err != nil {
		return nil, err
	}
	p.Process, p.public, p.admin = proc, proc.Public, proc.Admin
	return p, nil
}

func (p *gatewayPod) logLine(b []byte) {
	var line struct {
		Time    time.Time `json:"time"`
		Msg     string    `json:"msg"`
		Seconds float64   `json:"seconds"`
	}
	if json.Unmarshal(b, &line) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch line.Msg {
	case "drain finished":
		p.drainSeconds, p.drainedAt = line.Seconds, line.Time
	case "roomcast gateway stopped":
		p.stoppedAt = line.Time
	}
}

// startPods starts the named pods concurrently; they are killed when t ends if they
// are still running, and their logs are printed if t failed.
func startPods(t *testing.T, names []string, args ...string) []*gatewayPod {
	t.Helper()
	pods := make([]*gatewayPod, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { pods[i], errs[i] = launchPod(name, args...) })
	}
	wg.Wait()
	for _, p := range pods {
		if p == nil {
			continue
		}
		t.Cleanup(func() {
			p.Kill()
			if t.Failed() {
				t.Logf("log of pod %s:\n%s", p.name, p.Log())
			}
		})
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return pods
}

// drainReported returns the drain's duration as the pod logged it, and the time
// from the end of the drain to the pod's last log line.
func (p *gatewayPod) drainReported() (float64, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drainSeconds, p.stoppedAt.Sub(p.drainedAt)
}

func (p *gatewayPod) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// awaitExit waits for the process to end and returns its exit code and when it
// was reaped.
func (p *gatewayPod) awaitExit(t *testing.T, within time.Duration) (int, time.Time) {
	t.Helper()
	if _, err := p.Wait(within); err != nil {
		t.Fatal(err)
	}
	code, at, _ := p.Exit()
	return code, at
}

// balancer is a small HTTP load balancer: each request goes to the next pod, round
// robin, among those it sees ready (it polls /readyz every 100ms; see poll).
// Streams pass through unbuffered. Every response names its pod in podHeader.
type balancer struct {
	url       string
	srv       *http.Server
	transport *http.Transport

	mu       sync.Mutex
	backends []*backend
	next     int

	stop chan struct{}
	wg   sync.WaitGroup
}

type backend struct {
	pod   *gatewayPod
	proxy *httputil.ReverseProxy

	seenUp bool // poller only: the pod has been ready once

	mu        sync.Mutex
	ready     bool
	changedAt time.Time     // when ready last changed
	changed   chan struct{} // closed, and replaced, whenever ready changes
	misses    []miss        // readiness answers other than 200 once the pod had been ready
	noAnswer  []time.Time   // readiness polls that got no answer
}

type miss struct {
	at  time.Time
	got string
}

func newBalancer(t *testing.T) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &balancer{
		url:  "http://" + ln.Addr().String(),
		stop: make(chan struct{}),
		transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        0,
			MaxIdleConnsPerHost: 4096,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
	}
	lb.srv = &http.Server{Handler: lb, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = lb.srv.Serve(ln) }()
	t.Cleanup(func() {
		close(lb.stop)
		_ = lb.srv.Close()
		lb.wg.Wait()
		lb.transport.CloseIdleConnections()
	})
	return lb
}

// add puts p behind the balancer; it takes traffic once its /readyz answers 200.
func (lb *balancer) add(p *gatewayPod) *backend {
	target, err := url.Parse(p.public)
	if err != nil {
		panic(err)
	}
	be := &backend{pod: p, changed: make(chan struct{})}
	be.proxy = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     lb.transport,
		FlushInterval: -1,
		ModifyResponse: func(res *http.Response) error {
			res.Header.Set(podHeader, p.name)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway)
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	lb.mu.Lock()
	lb.backends = append(lb.backends, be)
	lb.mu.Unlock()
	lb.wg.Go(func() { lb.poll(be) })
	return be
}

// poll follows the pod's /readyz. An answer other than 200 takes the pod out of
// rotation at once; a poll that gets no answer (a timeout on a busy machine) does
// only when failThreshold of them come in a row, as a Kubernetes probe would.
func (lb *balancer) poll(be *backend) {
	const failThreshold = 3
	client := &http.Client{Transport: lb.transport, Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	failures := 0
	for {
		res, err := client.Get(be.pod.public + "/readyz")
		switch {
		case err != nil:
			failures++
			be.mu.Lock()
			if len(be.noAnswer) < 1000 {
				be.noAnswer = append(be.noAnswer, time.Now())
			}
			be.mu.Unlock()
			if failures >= failThreshold {
				be.setReady(false)
			}
		default:
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			failures = 0
			ready := res.StatusCode == http.StatusOK
			be.seenUp = be.seenUp || ready
			if !ready && be.seenUp {
				be.mu.Lock()
				if len(be.misses) < 100 {
					be.misses = append(be.misses, miss{time.Now(), fmt.Sprintf("%d %s", res.StatusCode, strings.TrimSpace(string(b)))})
				}
				be.mu.Unlock()
			}
			be.setReady(ready)
		}
		select {
		case <-lb.stop:
			return
		case <-be.pod.Done():
			be.setReady(false)
			return
		case <-tick.C:
		}
	}
}

func (be *backend) setReady(ready bool) {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.ready != ready {
		be.ready, be.changedAt = ready, time.Now()
		close(be.changed)
		be.changed = make(chan struct{})
	}
}

func (be *backend) isReady() bool {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.ready
}

// awaitState waits until the balancer's view of the pod is ready (or not), and
// returns when it became so.
func (be *backend) awaitState(ready bool, within time.Duration) (time.Time, bool) {
	deadline := time.After(within)
	for {
		be.mu.Lock()
		now, at, changed := be.ready, be.changedAt, be.changed
		be.mu.Unlock()
		if now == ready {
			return at, true
		}
		select {
		case <-changed:
		case <-deadline:
			return time.Time{}, false
		}
	}
}

// checkReadiness fails t if the pod, once ready, answered a readiness poll with
// anything but 200 before until (the zero time: ever): a pod under load must stay
// ready until it is told to drain.
func (be *backend) checkReadiness(t *testing.T, until time.Time) {
	t.Helper()
	be.mu.Lock()
	defer be.mu.Unlock()
	for _, m := range be.misses {
		if until.IsZero() || m.at.Before(until) {
			t.Errorf("pod %s answered a readiness poll at %s, before it was told to drain: %s", be.pod.name, m.at.Format("15:04:05.000"), m.got)
		}
	}
	n := 0
	for _, at := range be.noAnswer {
		if until.IsZero() || at.Before(until) {
			n++
		}
	}
	if n > 0 {
		t.Logf("pod %s: %d readiness polls got no answer within 2s before it was told to drain", be.pod.name, n)
	}
}

func (lb *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	be := lb.pick()
	if be == nil {
		http.Error(w, "no ready pod", http.StatusServiceUnavailable)
		return
	}
	be.proxy.ServeHTTP(w, r)
}

func (lb *balancer) pick() *backend {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	n := len(lb.backends)
	for i := 0; i < n; i++ {
		be := lb.backends[(lb.next+i)%n]
		if be.isReady() {
			lb.next = (lb.next + i + 1) % n
			return be
		}
	}
	return nil
}

// awaitReady waits until the balancer sees the pod ready.
func (be *backend) awaitReady(t *testing.T, within time.Duration) {
	t.Helper()
	if _, ok := be.awaitState(true, within); !ok {
		t.Fatalf("the balancer did not see pod %s ready within %s (running: %t)", be.pod.name, within, be.pod.Running())
	}
}

// awaitOut waits until the balancer has taken the pod out of rotation, and returns
// when it did.
func (be *backend) awaitOut(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	at, ok := be.awaitState(false, within)
	if !ok {
		t.Fatalf("the balancer still sees pod %s ready after %s", be.pod.name, within)
	}
	return at
}

// connRecord is one (re)connect of a subscriber.
type connRecord struct {
	at      time.Time // when the response headers arrived ("" pod and !ok: the request failed)
	pod     string
	status  int
	ok      bool
	resumed bool
	frames  int // events and heartbeats the stream carried, once it ended
}

func (c connRecord) String() string {
	if c.status == 0 {
		return "failed at " + c.at.Format("15:04:05.000")
	}
	return fmt.Sprintf("%d from %q at %s (resumed %t)", c.status, c.pod, c.at.Format("15:04:05.000"), c.resumed)
}

// subscriber is one resuming SSE client of one room. On any end of stream it waits
// for the last retry: hint (capped) and reconnects with Last-Event-ID. Its audit
// checks that the seqs it sees are dense and single, from seq 1 (every room is new),
// with no resync.
type subscriber struct {
	id    int
	room  string
	audit *gatewaytest.Audit

	subscribed chan struct{} // closed when the first admitted stream carried a frame
	subOnce    sync.Once

	mu    sync.Mutex
	conns []connRecord
	pod   string // pod of the open stream; "" between streams
	hint  time.Duration
}

// audience is a set of subscribers reading through one base URL.
type audience struct {
	base     string
	hc       *http.Client
	subs     []*subscriber
	maxDelay time.Duration
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// startAudience opens n subscribers spread over rooms and waits until every one has
// an admitted stream (it is then subscribed: the pod joins before the first byte).
func startAudience(t *testing.T, base string, rooms []string, n int) *audience {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &audience{
		base:     base,
		maxDelay: 3 * time.Second,
		ctx:      ctx,
		cancel:   cancel,
		hc: &http.Client{Transport: &http.Transport{
			Proxy:                 nil,
			MaxIdleConnsPerHost:   4096,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 15 * time.Second,
			DisableCompression:    true,
		}},
	}
	t.Cleanup(a.stop)
	for i := 0; i < n; i++ {
		room := rooms[i%len(rooms)]
		s := &subscriber{id: i, room: room, audit: gatewaytest.NewAudit(room, 1, false), subscribed: make(chan struct{}), hint: time.Second}
		a.subs = append(a.subs, s)
		a.wg.Go(func() { a.run(s) })
	}
	deadline := time.After(30 * time.Second)
	for _, s := range a.subs {
		select {
		case <-s.subscribed:
		case <-deadline:
			t.Fatalf("subscriber %d (%s) not subscribed within 30s", s.id, s.room)
		}
	}
	return a
}

func (a *audience) stop() {
	a.cancel()
	a.wg.Wait()
	a.hc.CloseIdleConnections()
}

func (a *audience) run(s *subscriber) {
	for a.ctx.Err() == nil {
		a.once(s)
		s.mu.Lock()
		delay := min(s.hint, a.maxDelay)
		s.mu.Unlock()
		t := time.NewTimer(delay)
		select {
		case <-a.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// once reads one stream until it ends.
func (a *audience) once(s *subscriber) {
	req, _ := http.NewRequestWithContext(a.ctx, http.MethodGet, a.base+"/rooms/"+s.room+"/events", nil)
	last := s.audit.Last()
	resumed := last != (replay.Position{})
	if resumed {
		req.Header.Set("Last-Event-ID", last.String())
	}
	res, err := a.hc.Do(req)
	if err != nil {
		if a.ctx.Err() == nil {
			s.mu.Lock()
			s.conns = append(s.conns, connRecord{at: time.Now(), resumed: resumed})
			s.mu.Unlock()
			s.audit.Note("connect failed: " + err.Error())
		}
		return
	}
	defer res.Body.Close()
	rec := connRecord{at: time.Now(), pod: res.Header.Get(podHeader), status: res.StatusCode, ok: res.StatusCode == http.StatusOK, resumed: resumed}
	s.mu.Lock()
	s.conns = append(s.conns, rec)
	idx := len(s.conns) - 1
	if rec.ok {
		s.pod = rec.pod
	}
	s.mu.Unlock()
	s.audit.Note(fmt.Sprintf("connect %s %d", rec.pod, rec.status))
	if !rec.ok {
		s.audit.Problem("status %d from %q", rec.status, rec.pod)
	}
	frames := 0 // events and heartbeats: proof that the stream was admitted
	defer func() {
		s.mu.Lock()
		s.pod = ""
		s.conns[idx].frames = frames
		s.mu.Unlock()
	}()
	if !rec.ok {
		_, _ = io.Copy(io.Discard, res.Body)
		return
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		s.audit.Problem("content type %q", ct)
	}
	dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
	for {
		f, err := dec.NextFrame()
		if err != nil {
			if a.ctx.Err() == nil {
				s.audit.Note("end: " + fmt.Sprint(err))
			}
			return
		}
		if f.Retry >= 0 {
			s.mu.Lock()
			s.hint = time.Duration(f.Retry) * time.Millisecond
			s.mu.Unlock()
		}
		switch {
		case f.IsAnchor():
			// Where a fresh stream starts: every subscriber joins before the first
			// publish, so its events from seq 1 on follow it.
		case f.HasData:
			s.audit.Frame(f.ID, f.Event)
			frames++
			s.subOnce.Do(func() { close(s.subscribed) })
		case f.Comment != "":
			// A heartbeat: only an admitted stream gets one. A turned-away stream
			// ends after its retry: hint, so the first stream counts as subscribed
			// only once it proved itself admitted.
			frames++
			s.subOnce.Do(func() { close(s.subscribed) })
		}
	}
}

// placement returns the pod of each subscriber's open stream ("" between streams).
func (a *audience) placement() map[*subscriber]string {
	out := make(map[*subscriber]string, len(a.subs))
	for _, s := range a.subs {
		s.mu.Lock()
		out[s] = s.pod
		s.mu.Unlock()
	}
	return out
}

// awaitPlaced waits until every subscriber has an open stream on one of pods.
func (a *audience) awaitPlaced(t *testing.T, within time.Duration, pods ...*gatewayPod) {
	t.Helper()
	names := map[string]bool{}
	for _, p := range pods {
		names[p.name] = true
	}
	replaytest.Eventually(t, within, fmt.Sprintf("every subscriber on %v", podNames(pods)), func() error {
		off := 0
		var example string
		for s, pod := range a.placement() {
			if !names[pod] {
				off++
				example = fmt.Sprintf("subscriber %d on %q", s.id, pod)
			}
		}
		if off > 0 {
			return fmt.Errorf("%d subscribers are not (e.g. %s)", off, example)
		}
		return nil
	})
}

func podNames(pods []*gatewayPod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.name)
	}
	return out
}

// onPod returns the subscribers whose open stream is on pod.
func (a *audience) onPod(pod *gatewayPod) []*subscriber {
	var out []*subscriber
	for s, name := range a.placement() {
		if name == pod.name {
			out = append(out, s)
		}
	}
	return out
}

// traffic publishes to rooms through base with an Idempotency-Key per event and
// retries 5xx answers and network errors with the same key until acknowledged.
type traffic struct {
	base   string
	prefix string
	rooms  []string
	hc     *http.Client
	ledger *gatewaytest.Ledger
}

func newTraffic(base, prefix string, rooms []string) *traffic {
	return &traffic{
		base: base, prefix: prefix, rooms: rooms, ledger: gatewaytest.NewLedger(),
		hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		}},
	}
}

// run publishes about rate events per second in total until stop. A publish begun
// before the stop is retried until acknowledged (at most 30s).
func (tr *traffic) run(rate int, stop <-chan struct{}) {
	tr.ledger.Publish(gatewaytest.Publishers{
		Targets: []string{tr.base}, Rooms: tr.rooms, Rate: rate, Key: tr.prefix, Client: tr.hc, MustAck: true,
	}, stop)
}

// settle waits for the publishers (already told to stop) to return, then until every
// subscriber has reached its room's newest acknowledged seq, then checks every
// subscriber against the acknowledged events: no loss, no duplicate, no resync. It
// leaves the subscribers running.
func settle(t *testing.T, tr *traffic, a *audience, within time.Duration) gatewaytest.Loss {
	t.Helper()
	audits := make([]*gatewaytest.Audit, len(a.subs))
	for i, s := range a.subs {
		audits[i] = s.audit
	}
	tr.ledger.Settle(t, audits, within)
	rep := tr.ledger.Check(t, audits)
	if rep.Duplicate > 0 || rep.Resyncs > 0 {
		t.Errorf("%d duplicate deliveries, %d resyncs: want none", rep.Duplicate, rep.Resyncs)
	}
	if rep.Acked < 300 {
		t.Errorf("only %d events acknowledged: the traffic did not run", rep.Acked)
	}
	return rep
}

// reconnectSpread looks at the subscribers that were on a pod when it was told to
// drain: each must reconnect to another pod, after the drain's delay, and stay. It
// returns the reconnects per second of the window, counted from windowStart, and
// the attempts beyond one per subscriber.
func reconnectSpread(t *testing.T, moved []*subscriber, victim string, signalled, windowStart time.Time, span time.Duration) (buckets []int, first, last time.Time, extra int) {
	t.Helper()
	buckets = make([]int, int(span/time.Second)+1)
	for _, s := range moved {
		s.mu.Lock()
		var after []connRecord
		for _, c := range s.conns {
			if c.at.After(signalled) {
				after = append(after, c)
			}
		}
		s.mu.Unlock()
		trace := s.audit.Trace()
		if len(after) == 0 {
			t.Errorf("subscriber %d left %s but never reconnected; trace %v", s.id, victim, trace)
			continue
		}
		// Every attempt must be answered 200 by another pod. An attempt turned away
		// there (no frame before its end: a failed join on a starved machine) may be
		// retried; one that was admitted must be the last.
		c := after[0]
		for i, a := range after {
			last := i == len(after)-1
			if !a.ok || a.pod == victim || !a.resumed || (!last && a.frames > 0) {
				t.Errorf("subscriber %d, drained from %s: reconnects %v, want one resumed stream on another pod; trace %v", s.id, victim, after, trace)
				break
			}
		}
		extra += len(after) - 1
		if c.at.Before(windowStart) {
			t.Errorf("subscriber %d moved off %s %s after the signal, before the drain delay ended", s.id, victim, c.at.Sub(signalled))
			continue
		}
		if first.IsZero() || c.at.Before(first) {
			first = c.at
		}
		if c.at.After(last) {
			last = c.at
		}
		if i := int(c.at.Sub(windowStart) / time.Second); i < len(buckets) {
			buckets[i]++
		} else {
			t.Errorf("subscriber %d reconnected %s after the window began, past %s", s.id, c.at.Sub(windowStart), span)
		}
	}
	return buckets, first, last, extra
}

// checkSpread asserts that no second of the window took more than factor times its
// fair share of the drained subscribers, and returns the peak.
func checkSpread(t *testing.T, what string, buckets []int, drained int, window time.Duration, factor float64) (peak int, fair float64) {
	t.Helper()
	fair = float64(drained) / window.Seconds()
	for _, n := range buckets {
		peak = max(peak, n)
	}
	if float64(peak) > factor*fair {
		t.Errorf("%s: %d reconnects in one second, over %.0f× the window's average of %.1f/s: %v", what, peak, factor, fair, buckets)
	}
	return peak, fair
}

func opened(m map[string]float64) float64 {
	return m[`roomcast_streams_opened_total{resumed="false"}`] + m[`roomcast_streams_opened_total{resumed="true"}`]
}

func rejected(m map[string]float64, reason string) float64 {
	return m[`roomcast_streams_rejected_total{reason="`+reason+`"}`]
}

func closed(m map[string]float64, reason string) float64 {
	return m[`roomcast_streams_closed_total{reason="`+reason+`"}`]
}

// percentile returns the q-quantile of ds (sorted in place).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
