package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

// Rollouts without a lost message: gateway processes on a real Redis Cluster behind a
// load balancer that follows /readyz, resuming subscribers that check every seq, and
// publishers that retry with an idempotency key until acknowledged.

// drainArgs are the flags of a fleet pod with a short drain.
func drainArgs(c *redistest.Cluster, delay, window, timeout time.Duration) []string {
	return []string{
		"--redis", strings.Join(c.Addrs(), ","),
		"--drain-delay", delay.String(), "--drain-window", window.String(), "--drain-timeout", timeout.String(),
		"--retry-min", "200ms", "--retry-max", "800ms",
		"--heartbeat", "2s",
		// Every simulated client connects from loopback.
		"--max-streams-per-ip", "0",
	}
}

const rolloutRetryMax = 800 * time.Millisecond

func roomNames(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, prefix+"."+strconv.Itoa(i))
	}
	return out
}

// stayedPut checks that the subscribers not in moved have not reconnected since.
func stayedPut(t *testing.T, a *audience, moved []*subscriber, since time.Time) {
	t.Helper()
	for _, s := range a.subs {
		if slices.Contains(moved, s) {
			continue
		}
		s.mu.Lock()
		n := 0
		for _, c := range s.conns {
			if c.at.After(since) {
				n++
			}
		}
		s.mu.Unlock()
		if n > 0 {
			trace := s.audit.Trace()
			t.Errorf("subscriber %d was not on the drained pod but reconnected %d times; trace %v", s.id, n, trace)
		}
	}
}

// TestRolloutDrainOneOfTwoPods: two pods share a cluster, 500 subscribers over 20
// rooms through the balancer, 100 events/s. One pod gets SIGTERM: it must exit 0
// before its deadline, its subscribers must move to the other pod spread over the
// drain window, and every subscriber must see every acknowledged event exactly once.
func TestRolloutDrainOneOfTwoPods(t *testing.T) {
	const (
		delay   = time.Second
		window  = 6 * time.Second
		timeout = 12 * time.Second
	)
	cluster := redistest.SharedCluster(t)
	pods := startPods(t, []string{"old", "kept"}, drainArgs(cluster, delay, window, timeout)...)
	old, kept := pods[0], pods[1]
	lb := newBalancer(t)
	beOld, beKept := lb.add(old), lb.add(kept)
	beOld.awaitReady(t, 10*time.Second)
	beKept.awaitReady(t, 10*time.Second)

	prefix := redistest.Prefix(t)
	rooms := roomNames(prefix, 20)
	a := startAudience(t, lb.url, rooms, 500)
	if n, m := len(a.onPod(old)), len(a.onPod(kept)); n < 200 || m < 200 {
		t.Fatalf("subscribers not spread over both pods: %d on old, %d on kept", n, m)
	}

	tr := newTraffic(lb.url, prefix, rooms)
	stop := make(chan struct{})
	tr.run(100, stop)
	time.Sleep(2 * time.Second) // traffic before the drain

	moved := a.onPod(old)
	signalled := time.Now()
	old.signal(t, syscall.SIGTERM)
	out := beOld.awaitOut(t, 2*time.Second)
	code, exitedAt := old.awaitExit(t, timeout+10*time.Second)
	took := exitedAt.Sub(signalled)
	if code != 0 {
		t.Errorf("the drained pod exited with code %d", code)
	}
	if took >= timeout {
		t.Errorf("the drain took %s: not before its %s deadline", took, timeout)
	}
	if took < delay+window/2 {
		t.Errorf("the drain took only %s with a %s delay and a %s window: closes were not spread", took, delay, window)
	}
	a.awaitPlaced(t, 10*time.Second, kept)
	time.Sleep(time.Second) // traffic after the drain
	close(stop)
	rep := settle(t, tr, a, 20*time.Second)

	for s, pod := range a.placement() {
		if pod != kept.name {
			t.Errorf("subscriber %d ended on %q, want %s", s.id, pod, kept.name)
		}
	}
	buckets, first, last, extra := reconnectSpread(t, moved, old.name, signalled, signalled.Add(delay), window+rolloutRetryMax+time.Second)
	peak, fair := checkSpread(t, "drain of old", buckets, len(moved), window, 3)
	stayedPut(t, a, moved, signalled)
	beOld.checkReadiness(t, signalled)
	beKept.checkReadiness(t, time.Time{})
	m, err := gatewaytest.Scrape(context.Background(), &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}, kept.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"draining", "rate", "capacity", "client_ip"} {
		if n := rejected(m, reason); n != 0 {
			t.Errorf("the surviving pod turned away %v streams for %s", n, reason)
		}
	}

	t.Logf("loss: %s", rep)
	drainSecs, shutdown := old.drainReported()
	t.Logf("drain: SIGTERM to exit %s (the pod reports a %.2fs drain and %s more to its last log line; the rest is the process's exit, 1s of which is the race detector's exit delay under -race; delay %s, window %s, timeout %s); out of the balancer after %s",
		took.Round(time.Millisecond), drainSecs, shutdown.Round(time.Millisecond), delay, window, timeout, out.Sub(signalled).Round(time.Millisecond))
	t.Logf("reconnects: %d subscribers moved (%d attempts beyond one each); per second of the window %v; peak %d/s vs the window's average %.1f/s (%.2f×); first %s, last %s after the window began",
		len(moved), extra, buckets, peak, fair, float64(peak)/fair,
		first.Sub(signalled.Add(delay)).Round(time.Millisecond), last.Sub(signalled.Add(delay)).Round(time.Millisecond))
}

// TestRolloutRollingRestartOfThreePods restarts a 3-pod fleet one pod at a time under
// subscribers and publishers: SIGTERM, exit 0, a replacement, ready in the balancer,
// next. Nothing may be lost or repeated, and each drain must spread its reconnects.
func TestRolloutRollingRestartOfThreePods(t *testing.T) {
	const (
		delay   = 500 * time.Millisecond
		window  = 3 * time.Second
		timeout = 8 * time.Second
	)
	cluster := redistest.SharedCluster(t)
	args := drainArgs(cluster, delay, window, timeout)
	live := startPods(t, []string{"a0", "b0", "c0"}, args...)
	lb := newBalancer(t)
	backends := map[*gatewayPod]*backend{}
	for _, p := range live {
		backends[p] = lb.add(p)
	}
	for _, p := range live {
		backends[p].awaitReady(t, 10*time.Second)
	}

	prefix := redistest.Prefix(t)
	rooms := roomNames(prefix, 15)
	a := startAudience(t, lb.url, rooms, 300)
	tr := newTraffic(lb.url, prefix, rooms)
	stop := make(chan struct{})
	tr.run(100, stop)
	time.Sleep(time.Second) // traffic before the rollout

	rolloutStart := time.Now()
	var steps []string
	for i, victim := range slices.Clone(live) {
		a.awaitPlaced(t, 10*time.Second, live...)
		moved := a.onPod(victim)
		signalled := time.Now()
		victim.signal(t, syscall.SIGTERM)
		backends[victim].awaitOut(t, 2*time.Second)
		backends[victim].checkReadiness(t, signalled)
		code, exitedAt := victim.awaitExit(t, timeout+10*time.Second)
		took := exitedAt.Sub(signalled)
		if code != 0 {
			t.Errorf("pod %s exited with code %d", victim.name, code)
		}
		if took >= timeout {
			t.Errorf("pod %s drained in %s: not before its %s deadline", victim.name, took, timeout)
		}
		repl := startPods(t, []string{fmt.Sprintf("%c1", 'a'+i)}, args...)[0]
		backends[repl] = lb.add(repl)
		backends[repl].awaitReady(t, 15*time.Second)
		live[slices.Index(live, victim)] = repl
		a.awaitPlaced(t, 10*time.Second, live...)

		buckets, _, _, extra := reconnectSpread(t, moved, victim.name, signalled, signalled.Add(delay), window+rolloutRetryMax+time.Second)
		peak, fair := checkSpread(t, "drain of "+victim.name, buckets, len(moved), window, 3)
		stayedPut(t, a, moved, signalled)
		steps = append(steps, fmt.Sprintf("%s: %d moved (%d attempts beyond one each), drain %s, reconnects/s %v, peak %d vs average %.1f (%.2f×)",
			victim.name, len(moved), extra, took.Round(time.Millisecond), buckets, peak, fair, float64(peak)/fair))
	}
	rolloutTook := time.Since(rolloutStart)
	time.Sleep(time.Second) // traffic after the rollout
	close(stop)
	rep := settle(t, tr, a, 20*time.Second)
	for s, pod := range a.placement() {
		if !slices.ContainsFunc(live, func(p *gatewayPod) bool { return p.name == pod }) {
			t.Errorf("subscriber %d ended on %q, want one of %v", s.id, pod, podNames(live))
		}
	}
	for _, p := range live {
		backends[p].checkReadiness(t, time.Time{})
	}
	perPod := map[string]int{}
	for _, pod := range a.placement() {
		perPod[pod]++
	}

	t.Logf("loss: %s", rep)
	t.Logf("rollout of 3 pods in %s; subscribers per pod at the end %v", rolloutTook.Round(time.Millisecond), perPod)
	for _, s := range steps {
		t.Logf("step %s", s)
	}
}

// stormClient is one client of the reconnect storm: it reconnects, honouring the
// retry: hint, until it is admitted (its stream stays open and carries heartbeats).
type stormClient struct {
	attempts   int
	turnedAway int
	hints      []time.Duration // of the turned-away attempts
	statuses   []int           // non-200 answers
	netErrs    []string
	admittedAt time.Time // when the admitted attempt's response arrived
	sentAt     time.Time // when the admitted attempt's request was sent
	lateEnd    bool      // an admitted stream ended
	in         chan struct{}
}

func (c *stormClient) run(ctx context.Context, hc *http.Client, url string) {
	for ctx.Err() == nil {
		delay := c.attempt(ctx, hc, url)
		t := time.NewTimer(min(delay, 3*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// attempt opens one stream and reads it until it ends or ctx does. A stream that
// carries a heartbeat was admitted; one that ends before any is turned away. It
// returns how long to wait before the next attempt: the stream's retry: hint.
func (c *stormClient) attempt(ctx context.Context, hc *http.Client, url string) time.Duration {
	c.attempts++
	sent := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.netErrs = append(c.netErrs, err.Error())
		}
		return 500 * time.Millisecond
	}
	defer res.Body.Close()
	at := time.Now()
	if res.StatusCode != http.StatusOK {
		c.statuses = append(c.statuses, res.StatusCode)
		_, _ = io.Copy(io.Discard, res.Body)
		return time.Second
	}
	dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
	hint, admitted := time.Duration(-1), false
	for {
		f, err := dec.NextFrame()
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case admitted:
				c.lateEnd = true
			default:
				c.turnedAway++
				c.hints = append(c.hints, hint)
			}
			return max(hint, 0)
		}
		if f.Retry >= 0 {
			hint = time.Duration(f.Retry) * time.Millisecond
		}
		if f.Comment == "hb" && !admitted {
			admitted = true
			if c.admittedAt.IsZero() {
				c.admittedAt, c.sentAt = at, sent
				close(c.in)
			}
		}
	}
}

type scrapeSample struct {
	start, end time.Time
	opened     float64
}

// TestRolloutReconnectStorm: 2,000 clients hit one pod at once, with admission
// limited to 200 streams/s and a burst of 100. Every client must get in within a
// bound, none may ever see a status other than 200, the turned-away ones must get a
// longer retry: and an ended stream, and no second may admit more than rate + burst:
// counted exactly from the clients' side, and from the pod's own counter allowing
// for the delay between a stream's admission and its count.
func TestRolloutReconnectStorm(t *testing.T) {
	const (
		rate    = 200
		burst   = 100
		clients = 2000
	)
	cluster := redistest.SharedCluster(t)
	pod := startPods(t, []string{"storm"},
		"--redis", strings.Join(cluster.Addrs(), ","),
		"--accept-rate", strconv.Itoa(rate), "--accept-burst", strconv.Itoa(burst),
		"--retry-min", "200ms", "--retry-max", "800ms", "--heartbeat", "1s",
		"--drain-delay", "0s", "--drain-window", "1s", "--drain-timeout", "5s",
		"--max-streams-per-ip", "0")[0]
	rooms := roomNames(redistest.Prefix(t), 20)
	hc := &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second,
		ResponseHeaderTimeout: 15 * time.Second, DisableCompression: true,
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		hc.CloseIdleConnections()
	})
	cs := make([]*stormClient, clients)
	gate := make(chan struct{})
	for i := range cs {
		c := &stormClient{in: make(chan struct{})}
		cs[i] = c
		url := pod.public + "/rooms/" + rooms[i%len(rooms)] + "/events"
		wg.Go(func() {
			<-gate
			c.run(ctx, hc, url)
		})
	}
	scrapeHC := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	scrapeStart := time.Now()
	before, err := gatewaytest.Scrape(context.Background(), scrapeHC, pod.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}

	// Sample the pod's admitted-stream counter every 100ms for the whole storm, from
	// before its first connection.
	var (
		samples    = []scrapeSample{{start: scrapeStart, end: time.Now(), opened: opened(before)}}
		scrapeErrs int
		scrapeErr  error // the first
	)
	sampling := make(chan struct{})
	samplerDone := make(chan struct{})
	stopSampling := sync.OnceFunc(func() { close(sampling); <-samplerDone })
	t.Cleanup(stopSampling)
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			last := false
			select {
			case <-sampling:
				last = true
			case <-tick.C:
			}
			start := time.Now()
			m, err := gatewaytest.Scrape(context.Background(), scrapeHC, pod.admin+"/metrics")
			if err != nil {
				scrapeErrs++
				if scrapeErr == nil {
					scrapeErr = err
				}
			} else {
				samples = append(samples, scrapeSample{start: start, end: time.Now(), opened: opened(m)})
			}
			if last {
				return
			}
		}
	}()

	start := time.Now()
	close(gate)
	const bound = 45 * time.Second
	deadline := time.After(bound)
	for i, c := range cs {
		select {
		case <-c.in:
		case <-deadline:
			t.Fatalf("client %d not admitted within %s", i, bound)
		}
	}
	// The sampler takes one more sample, past the last admission, and stops.
	stopSampling()
	after, err := gatewaytest.Scrape(context.Background(), scrapeHC, pod.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()

	var (
		lastIn                     time.Duration
		attempts, turned, statuses int
		netErrs                    []string
		hints                      []time.Duration
	)
	for _, c := range cs {
		lastIn = max(lastIn, c.admittedAt.Sub(start))
		attempts += c.attempts
		turned += c.turnedAway
		statuses += len(c.statuses)
		netErrs = append(netErrs, c.netErrs...)
		hints = append(hints, c.hints...)
		if c.lateEnd {
			t.Errorf("an admitted stream ended")
		}
		for _, s := range c.statuses {
			t.Errorf("a client got status %d", s)
		}
	}
	if len(netErrs) > 0 {
		t.Errorf("%d attempts failed without an answer, e.g. %s", len(netErrs), netErrs[0])
	}
	for _, h := range hints {
		if h < 400*time.Millisecond || h > 1600*time.Millisecond {
			t.Errorf("a turned-away stream ended with retry hint %s, want 2×(200ms..800ms)", h)
			break
		}
	}

	admitted := opened(after) - opened(before)
	byRate := rejected(after, "rate") - rejected(before, "rate")
	if admitted != clients {
		t.Errorf("the pod admitted %v streams, want %d: each client once", admitted, clients)
	}
	if byRate <= 0 {
		t.Errorf("no stream was turned away for rate")
	}
	// A stream whose room could not be joined in time (the bus subscription of a
	// room's first member times out on a starved machine) also ends with a longer
	// retry: hint, as the contract asks; it is counted apart.
	joinFailed := closed(after, "unavailable") - closed(before, "unavailable")
	if float64(turned) != byRate+joinFailed {
		t.Errorf("clients saw %d streams end after a retry hint; the pod counts %v turned away for rate and %v failed joins", turned, byRate, joinFailed)
	}
	for _, reason := range []string{"draining", "capacity", "client_ip"} {
		if n := rejected(after, reason) - rejected(before, reason); n != 0 {
			t.Errorf("%v streams turned away for %s", n, reason)
		}
	}

	// The pod's counter, sampled: no window of at most one second (from the start of
	// one scrape to the end of a later one, so the counter's own reads are at most 1s
	// apart) may count more than rate + burst new streams. The counter moves when a
	// stream has opened (after its join and its first write), not when it took its
	// token, so a pod that stalls for a moment under the storm bunches its
	// increments: the bound allows counterLag of such delay.
	const counterLag = 500 * time.Millisecond
	if scrapeErrs > 0 {
		t.Errorf("%d scrapes failed, the first with %v", scrapeErrs, scrapeErr)
	}
	// The pod's view needs scrapes well inside a second of each other; a machine too
	// loaded to scrape that often (each scrape taking seconds) cannot show it, and the
	// clients' exact check below still bounds the admissions.
	peak, peakAt := 0.0, time.Duration(0)
	if len(samples) < 20 {
		var took []time.Duration
		for _, s := range samples {
			took = append(took, s.end.Sub(s.start).Round(time.Millisecond))
		}
		t.Logf("only %d samples of /metrics over %s, taking %v: the pod's own count is not checked, the clients' is",
			len(samples), time.Since(start).Round(time.Millisecond), took)
	} else {
		for i := range samples {
			for j := i + 1; j < len(samples) && samples[j].end.Sub(samples[i].start) <= time.Second; j++ {
				if d := samples[j].opened - samples[i].opened; d > peak {
					peak, peakAt = d, samples[i].start.Sub(start)
				}
			}
		}
		if limit := burst + rate*(1+counterLag.Seconds()); peak > limit {
			t.Errorf("the pod counted %v streams opened within one second (from %s into the storm), over rate %d + burst %d (+%s of lag: %v)",
				peak, peakAt.Round(time.Millisecond), rate, burst, counterLag, limit)
		}
	}
	// The same from the clients' side, exactly. A stream took its token after its
	// request went out and before its response arrived, so for any a ≤ b the
	// admitted streams whose whole request lies within [a, b] took their tokens
	// within it: at most burst + rate·(b−a) of them. Checked for every a (a request's
	// start) and b (a response's arrival): one-second windows, and the cumulative
	// envelope from the first request on. (Counting responses by arrival alone
	// would not do: a response waits for its join and for the client to be
	// scheduled, and arrivals bunch.)
	type span struct{ from, to time.Duration }
	spans := make([]span, 0, len(cs))
	for _, c := range cs {
		spans = append(spans, span{c.sentAt.Sub(start), c.admittedAt.Sub(start)})
	}
	slices.SortFunc(spans, func(x, y span) int { return cmp.Compare(x.to, y.to) })
	var (
		secondPeak   int // most admissions inside one second
		secondPeakAt time.Duration
		worst        = -float64(burst) // admissions over the bucket's allowance, in the tightest window
		worstFrom    time.Duration
		worstTo      time.Duration
		worstCount   int
	)
	for _, a := range spans {
		n, inSecond := 0, 0
		for _, b := range spans {
			if b.from < a.from {
				continue
			}
			n++
			if b.to <= a.from+time.Second {
				inSecond = n
			}
			if over := float64(n) - (burst + rate*(b.to-a.from).Seconds()); over > worst {
				worst, worstFrom, worstTo, worstCount = over, a.from, b.to, n
			}
		}
		if inSecond > secondPeak {
			secondPeak, secondPeakAt = inSecond, a.from
		}
	}
	if secondPeak > rate+burst {
		t.Errorf("%d streams were requested and admitted within one second (from %s into the storm), over rate %d + burst %d",
			secondPeak, secondPeakAt.Round(time.Millisecond), rate, burst)
	}
	if worst >= 1 {
		t.Errorf("%d streams were requested and admitted between %s and %s into the storm: %.0f more than a bucket of rate %d and burst %d allows",
			worstCount, worstFrom.Round(time.Millisecond), worstTo.Round(time.Millisecond), worst, rate, burst)
	}
	var scrapeTook []time.Duration
	for _, s := range samples {
		scrapeTook = append(scrapeTook, s.end.Sub(s.start))
	}

	t.Logf("storm: %d clients, %d attempts, %d turned away (the pod counts %v for rate, %v failed joins), %d answers other than 200, %d failed requests",
		clients, attempts, turned, byRate, joinFailed, statuses, len(netErrs))
	t.Logf("storm: admitted within any 1s: at most %d seen from the clients (requested and admitted inside the second; at %s), at most %v counted by the pod's /metrics (at %s); limit %d (rate %d + burst %d)",
		secondPeak, secondPeakAt.Round(time.Millisecond), peak, peakAt.Round(time.Millisecond), rate+burst, rate, burst)
	t.Logf("storm: tightest window from the clients: %d admitted between %s and %s, %+.0f against the bucket's allowance (must stay < 1)",
		worstCount, worstFrom.Round(time.Millisecond), worstTo.Round(time.Millisecond), worst)
	t.Logf("storm: last client in after %s (the limit allows no less than %.1fs); turned-away retry hints p50 %s, max %s; %d samples of /metrics, each taking p50 %s, max %s",
		lastIn.Round(time.Millisecond), float64(clients-burst)/rate, percentile(hints, 0.5), percentile(hints, 1),
		len(samples), percentile(scrapeTook, 0.5).Round(time.Millisecond), percentile(scrapeTook, 1).Round(time.Millisecond))
}
