package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
	"github.com/roomcast/roomcast/rooms"
)

// moved asserts that the sample moved by want between two scrapes.
func moved(t *testing.T, before, after gatewaytest.Metrics, want float64, name string, labels ...string) {
	t.Helper()
	if d := after.Value(name, labels...) - before.Value(name, labels...); d != want {
		t.Errorf("%s moved by %v, want %v", gatewaytest.SampleKey(name, labels...), d, want)
	}
}

// awaitMoved scrapes until the sample has moved by at least want since before,
// and returns that scrape.
func awaitMoved(t *testing.T, p *pod, before gatewaytest.Metrics, want float64, name string, labels ...string) gatewaytest.Metrics {
	t.Helper()
	var m gatewaytest.Metrics
	replaytest.Eventually(t, 10*time.Second, gatewaytest.SampleKey(name, labels...)+" moved", func() bool {
		m = p.metrics(t)
		return m.Value(name, labels...)-before.Value(name, labels...) >= want
	})
	return m
}

// statsOf reads the pod's /admin/stats as a generic document.
func statsOf(t *testing.T, p *pod) map[string]any {
	t.Helper()
	res := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "")
	var st map[string]any
	if err := json.Unmarshal([]byte(res.body), &st); err != nil || res.status != http.StatusOK {
		t.Fatalf("stats: %d %s", res.status, res.body)
	}
	return st
}

// stalledClient opens room's stream on a connection that never reads.
func stalledClient(t *testing.T, p *pod, room string) net.Conn {
	t.Helper()
	return stalledStream(t, p, "/rooms/"+room+"/events")
}

// stalledStream is stalledClient for any stream path.
func stalledStream(t *testing.T, p *pod, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.public.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path)
	return c
}

// awaitClosed waits until the server closes the connection c.
func awaitClosed(t *testing.T, p *pod, c net.Conn, publish func()) {
	t.Helper()
	want := c.LocalAddr().String()
	for i := 0; ; i++ {
		publish()
		select {
		case addr := <-p.closedConns:
			if addr == want {
				return
			}
		default:
		}
		if i == 2000 {
			t.Fatal("the stalled client was never closed")
		}
	}
}

// TestMetricsClientDrops provokes each drop reason once and checks that
// roomcast_client_drops_total moved by one under that reason alone, and that
// /admin/stats reports the same numbers.
func TestMetricsClientDrops(t *testing.T) {
	const drops = "roomcast_client_drops_total"
	t.Run("slow_consumer", func(t *testing.T) {
		// The stream stays blocked in its write until the deadline: that failure
		// comes after the drop and is not a second one.
		p := newPod(t, podConfig{queue: 4, gw: gateway.Config{MaxBody: 1 << 20, WriteTimeout: time.Second}})
		before := p.metrics(t)
		c := stalledClient(t, p, "slow")
		replaytest.Eventually(t, 10*time.Second, "stalled client joined", func() bool { return p.rooms.Len() == 1 })
		body := `"` + strings.Repeat("s", 128<<10) + `"`
		awaitClosed(t, p, c, func() { p.publish(t, "slow", body) })
		after := p.metrics(t)
		moved(t, before, after, 1, drops, "reason", "slow_consumer")
		moved(t, before, after, 0, drops, "reason", "queue_budget")
		moved(t, before, after, 0, drops, "reason", "write_failed")
		st := statsOf(t, p)
		if d := st["drops"].(map[string]any); d["slow_consumer"] != 1.0 || d["write_failed"] != 0.0 {
			t.Errorf("stats drops %v, want slow_consumer 1, write_failed 0", d)
		}
	})
	t.Run("slow_consumer_multiplexed", func(t *testing.T) {
		// One room of a stream of two overflows while the stream is blocked in its
		// write; the write then fails and the stream closes its other room: still
		// one drop, a slow consumer.
		p := newPod(t, podConfig{queue: 4, gw: gateway.Config{MaxBody: 1 << 20, WriteTimeout: time.Second}})
		before := p.metrics(t)
		c := stalledStream(t, p, "/events?room=slowmux&room=quiet")
		replaytest.Eventually(t, 10*time.Second, "stalled client joined", func() bool { return p.rooms.Len() == 2 })
		body := `"` + strings.Repeat("s", 128<<10) + `"`
		awaitClosed(t, p, c, func() { p.publish(t, "slowmux", body) })
		after := p.metrics(t)
		moved(t, before, after, 1, drops, "reason", "slow_consumer")
		moved(t, before, after, 0, drops, "reason", "write_failed")
	})
	t.Run("write_failed", func(t *testing.T) {
		p := newPod(t, podConfig{queue: 100000, queueBytes: 1 << 30, gw: gateway.Config{WriteTimeout: 200 * time.Millisecond, MaxBody: 1 << 20}})
		before := p.metrics(t)
		c := stalledClient(t, p, "w")
		replaytest.Eventually(t, 10*time.Second, "stalled client joined", func() bool { return p.rooms.Len() == 1 })
		body := `"` + strings.Repeat("w", 256<<10) + `"`
		awaitClosed(t, p, c, func() { p.publish(t, "w", body) })
		after := p.metrics(t)
		moved(t, before, after, 1, drops, "reason", "write_failed")
		moved(t, before, after, 0, drops, "reason", "slow_consumer")
		if d := statsOf(t, p)["drops"].(map[string]any); d["write_failed"] != 1.0 {
			t.Errorf("stats drops %v, want write_failed 1", d)
		}
	})
	t.Run("queue_budget", func(t *testing.T) {
		// The pod's budget: members that never read are closed by the scan.
		log, err := replay.NewMemoryLog(replay.MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := rooms.New(log, log, rooms.Config{Queue: 1000, QueueBytes: 1 << 20, MaxQueuedBytes: 4 << 10,
			BudgetInterval: 10 * time.Millisecond, Logger: gatewaytest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		a := budgetAdmin(t, log, reg)
		ctx := context.Background()
		m, err := reg.Join(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		defer reg.Leave(m)
		before := scrape(t, a)
		for range 8 {
			if _, err := log.Append(ctx, "b", replay.Message{Body: json.RawMessage(`"` + strings.Repeat("q", 1000) + `"`)}); err != nil {
				t.Fatal(err)
			}
		}
		<-m.Done()
		// The scan counts the drop just after it closed the member.
		var after gatewaytest.Metrics
		replaytest.Eventually(t, 10*time.Second, "the budget drop counted", func() bool {
			after = scrape(t, a)
			return after.Sum(drops) > before.Sum(drops)
		})
		moved(t, before, after, 1, drops, "reason", "queue_budget")
		moved(t, before, after, 0, drops, "reason", "slow_consumer")
	})
}

// budgetAdmin serves the admin listener of a server over log and reg.
func budgetAdmin(t *testing.T, log replay.Log, reg *rooms.Registry) string {
	t.Helper()
	dr, err := drain.New(reg, drain.Config{Timeout: time.Second, Logger: gatewaytest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(log, reg, dr, gateway.Config{Logger: gatewaytest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(srv.Admin())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		admin.Close()
		_ = reg.Close(ctx)
		_ = log.Close(ctx)
	})
	return admin.URL
}

func scrape(t *testing.T, adminURL string) gatewaytest.Metrics {
	t.Helper()
	m, err := gatewaytest.Scrape(context.Background(), http.DefaultClient, adminURL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// droppingLog is a memory log whose doorbell loses the rings drop picks, as a
// lossy pub/sub would.
type droppingLog struct {
	*replay.MemoryLog
	mu   sync.Mutex
	drop map[uint64]bool // seqs whose ring is lost
}

// Unwrap is the log it wraps, whose control plane it has (replay.ControlOf).
func (d *droppingLog) Unwrap() replay.Log { return d.MemoryLog }

func (d *droppingLog) Subscribe(ctx context.Context, room string, ring func(replay.Event)) error {
	return d.MemoryLog.Subscribe(ctx, room, func(ev replay.Event) {
		d.mu.Lock()
		lost := d.drop[ev.Seq]
		d.mu.Unlock()
		if !lost {
			ring(ev)
		}
	})
}

func (d *droppingLog) lose(seqs ...uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range seqs {
		d.drop[s] = true
	}
}

// TestMetricsGapsAndResyncs loses doorbells: a gap the log fills moves
// roomcast_gaps_repaired_total and roomcast_doorbell_repairs_total; one it cannot
// fill moves roomcast_room_resyncs_total and roomcast_resyncs_sent_total instead.
func TestMetricsGapsAndResyncs(t *testing.T) {
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{History: 2})
	if err != nil {
		t.Fatal(err)
	}
	log := &droppingLog{MemoryLog: mem, drop: map[uint64]bool{}}
	p := newPodOn(t, log, podConfig{})
	s := p.subscribe(t, "g", "")
	s.nextAny()
	p.publish(t, "g", `{"i":1}`)
	if f := s.next(); f.seq(t) != 1 {
		t.Fatalf("first event %+v", f)
	}

	before := p.metrics(t)
	log.lose(2)
	p.publish(t, "g", `{"i":2}`)
	p.publish(t, "g", `{"i":3}`)
	for _, want := range []uint64{2, 3} {
		if f := s.next(); f.seq(t) != want {
			t.Fatalf("event %+v, want seq %d", f, want)
		}
	}
	after := p.metrics(t)
	moved(t, before, after, 1, "roomcast_gaps_repaired_total")
	moved(t, before, after, 1, "roomcast_doorbell_repairs_total")
	moved(t, before, after, 0, "roomcast_room_resyncs_total")
	moved(t, before, after, 0, "roomcast_forks_total")
	if st := statsOf(t, p); st["gaps_repaired"] != 1.0 || st["repairs"] != 1.0 {
		t.Errorf("stats gaps_repaired %v repairs %v, want 1 and 1", st["gaps_repaired"], st["repairs"])
	}

	// Three rings lost with a history of 2: the log cannot fill the gap.
	before = after
	log.lose(4, 5, 6)
	for i := 4; i <= 7; i++ {
		p.publish(t, "g", fmt.Sprintf(`{"i":%d}`, i))
	}
	if f := s.next(); f.event != "resync" {
		t.Fatalf("frame %+v, want a resync", f)
	}
	after = p.metrics(t)
	moved(t, before, after, 0, "roomcast_gaps_repaired_total")
	moved(t, before, after, 1, "roomcast_doorbell_repairs_total")
	moved(t, before, after, 1, "roomcast_room_resyncs_total")
	moved(t, before, after, 1, "roomcast_resyncs_sent_total")
	moved(t, before, after, 0, "roomcast_forks_total")
	if st := statsOf(t, p); st["resyncs"] != 1.0 {
		t.Errorf("stats resyncs %v, want 1", st["resyncs"])
	}
}

// TestMetricsForks: the room's history changes epoch under a member (the embedded
// log forgot the idle room); roomcast_forks_total moves by one.
func TestMetricsForks(t *testing.T) {
	clock := replaytest.NewClock(time.Now())
	p := newPod(t, podConfig{mem: replay.MemoryConfig{HistoryTTL: time.Minute, Now: clock.Now}})
	s := p.subscribe(t, "f", "")
	s.nextAny()
	p.publish(t, "f", `{"i":1}`)
	s.next()
	before := p.metrics(t)
	clock.Advance(2 * time.Minute)
	p.publish(t, "f", `{"i":2}`)
	if f := s.next(); f.event != "resync" {
		t.Fatalf("frame %+v, want a resync into the new epoch", f)
	}
	if f := s.next(); f.seq(t) != 1 {
		t.Fatalf("frame %+v, want the new epoch's first event", f)
	}
	after := p.metrics(t)
	moved(t, before, after, 1, "roomcast_forks_total")
	if st := statsOf(t, p); st["forks"] != 1.0 {
		t.Errorf("stats forks %v, want 1", st["forks"])
	}
}

// TestMetricsLatencies: an event delivered live moves the publish-to-deliver and
// fan-out lag histograms by one each (one room, one member), and the sampler
// reports the members' queue depths.
func TestMetricsLatencies(t *testing.T) {
	p := newPod(t, podConfig{})
	s := p.subscribe(t, "l", "")
	s.nextAny()
	before := p.metrics(t)
	p.publish(t, "l", `{"i":1}`)
	s.next()
	// Observed once the write returned, which may be after the client read it.
	after := awaitMoved(t, p, before, 1, "roomcast_publish_to_deliver_seconds_count")
	moved(t, before, after, 1, "roomcast_publish_to_deliver_seconds_count")
	moved(t, before, after, 1, "roomcast_fanout_lag_seconds_count")
	if v := after.Value("roomcast_publish_to_deliver_seconds_sum") - before.Value("roomcast_publish_to_deliver_seconds_sum"); v < 0 || v > 10 {
		t.Errorf("publish to deliver took %vs", v)
	}
	replaytest.Eventually(t, 10*time.Second, "a queue depth sample", func() bool {
		return p.metrics(t).Value("roomcast_client_queue_depth_count") > 0
	})
	// History replayed on resume is not live: it does not count.
	before = p.metrics(t)
	r := p.subscribe(t, "l", "", "Last-Event-ID", "0")
	if f := r.next(); f.seq(t) != 1 {
		t.Fatalf("replayed %+v", f)
	}
	// A live event after it is the marker: a stream counts a frame delivered just
	// after observing its latency, so once the delivered count holds the replayed
	// frame and both streams' live one, every observation has landed.
	p.publish(t, "l", `{"i":2}`)
	s.next()
	r.next()
	after = awaitMoved(t, p, before, 3, "roomcast_events_delivered_total")
	moved(t, before, after, 2, "roomcast_publish_to_deliver_seconds_count")
}

// TestMetricsMultiplexedDeliver: a multiplexed stream's live events count too.
func TestMetricsMultiplexedDeliver(t *testing.T) {
	p := newPod(t, podConfig{})
	s := openStreamAt(t, p.public.URL+"/events?room=m1&room=m2")
	s.nextAny()
	before := p.metrics(t)
	p.publish(t, "m1", `{"i":1}`)
	p.publish(t, "m2", `{"i":2}`)
	s.next()
	s.next()
	moved(t, before, awaitMoved(t, p, before, 2, "roomcast_publish_to_deliver_seconds_count"), 2, "roomcast_publish_to_deliver_seconds_count")
}

// TestMetricsEvictions: the embedded log at its byte bound sheds old events and
// counts them in roomcast_log_evictions_total.
func TestMetricsEvictions(t *testing.T) {
	p := newPod(t, podConfig{mem: replay.MemoryConfig{MaxBytes: 4 << 10}})
	before := p.metrics(t)
	body := `"` + strings.Repeat("e", 1000) + `"`
	for range 6 {
		p.publish(t, "e", body)
	}
	after := p.metrics(t)
	if d := after.Value("roomcast_log_evictions_total") - before.Value("roomcast_log_evictions_total"); d < 2 {
		t.Errorf("roomcast_log_evictions_total moved by %v, want at least 2 (6 KB into 4 KiB)", d)
	}
	if got, want := after.Value("roomcast_log_evictions_total"), float64(p.mem.Evictions()); got != want {
		t.Errorf("roomcast_log_evictions_total %v, log says %v", got, want)
	}
}

// TestMetricsDrainAndStreams: connects, resumes and the drain's closes move their
// counters, and /admin/stats reads the same counters.
func TestMetricsDrainAndStreams(t *testing.T) {
	p := newPod(t, podConfig{drain: drain.Config{Window: time.Millisecond, Timeout: 10 * time.Second}})
	before := p.metrics(t)
	a := p.subscribe(t, "d", "")
	a.nextAny()
	b := p.subscribe(t, "d", "", "Last-Event-ID", "0")
	b.nextAny()
	p.publish(t, "d", `{"i":1}`)
	a.next()
	b.next()
	after := p.metrics(t)
	moved(t, before, after, 1, "roomcast_streams_opened_total", "resumed", "true")
	moved(t, before, after, 1, "roomcast_streams_opened_total", "resumed", "false")
	moved(t, before, after, 1, "roomcast_events_published_total")
	moved(t, before, after, 2, "roomcast_events_delivered_total")
	st := statsOf(t, p)
	if st["published"] != after.Value("roomcast_events_published_total") || st["delivered"] != after.Value("roomcast_events_delivered_total") {
		t.Errorf("stats published %v delivered %v, metrics %v and %v", st["published"], st["delivered"],
			after.Value("roomcast_events_published_total"), after.Value("roomcast_events_delivered_total"))
	}
	if c, r := st["connects_per_second"].(float64), st["resumes_per_second"].(float64); c <= 0 || r <= 0 || r > c {
		t.Errorf("stats connects_per_second %v resumes_per_second %v, want both above 0, resumes at most connects", c, r)
	}

	p.drain.Start()
	a.waitEnd()
	b.waitEnd()
	<-p.drain.Done()
	after = p.metrics(t)
	moved(t, before, after, 2, "roomcast_drain_closed_total")
	if st := statsOf(t, p); st["drain"].(map[string]any)["closed"] != 2.0 {
		t.Errorf("stats drain %v, want closed 2", st["drain"])
	}
}

// TestMetricsBuildInfo: one roomcast_build_info sample, 1, naming the Go version.
func TestMetricsBuildInfo(t *testing.T) {
	p := newPod(t, podConfig{})
	m := p.metrics(t)
	n := 0
	for k, v := range m {
		if strings.HasPrefix(k, "roomcast_build_info{") {
			n++
			if v != 1 || !strings.Contains(k, `goversion="go`) || !strings.Contains(k, `version="`) {
				t.Errorf("%s = %v", k, v)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d roomcast_build_info samples, want 1", n)
	}
}

// TestGoCollectorHasSchedLatencies: the gateway's Go collector exports the
// scheduler latency histogram.
func TestGoCollectorHasSchedLatencies(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(gateway.GoCollector())
	// schedCount is how many goroutine schedulings the histogram has seen.
	schedCount := func() uint64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "go_sched_latencies_seconds" {
				return f.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		t.Fatal("no go_sched_latencies_seconds")
		return 0
	}
	before := schedCount()
	// Goroutines that wait to run are what it measures: start some, and let the
	// runtime's sampled histogram see them.
	replaytest.Eventually(t, 10*time.Second, "go_sched_latencies_seconds moved", func() bool {
		var wg sync.WaitGroup
		for range 1000 {
			wg.Add(1)
			go func() { defer wg.Done(); runtime.Gosched() }()
		}
		wg.Wait()
		return schedCount() > before
	})
}

// Every refusal of POST /events counts in roomcast_publish_errors_total under its
// code, whether it refuses the whole batch or one item of it.
func TestBatchRefusalsAreCounted(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxBatchItems: 2}})
	const name = "roomcast_publish_errors_total"
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`[{"room":"a",`, 400, "invalid_json"},
		{`[]`, 400, "empty_batch"},
		{`[{"room":"a","body":1},{"room":"a","body":2},{"room":"a","body":3}]`, 413, "too_many_items"},
		// A well-formed batch whose first item is not an object: that item alone fails.
		{`[7,{"room":"a","body":1}]`, 200, "invalid_item"},
	} {
		before := p.metrics(t)
		res := do(t, http.MethodPost, p.public.URL+"/events", tc.body, "Content-Type", "application/json")
		if res.status != tc.status || !strings.Contains(res.body, `"`+tc.code+`"`) {
			t.Fatalf("POST /events %s: %d %s, want %d with %s", tc.body, res.status, res.body, tc.status, tc.code)
		}
		moved(t, before, p.metrics(t), 1, name, "error", tc.code)
	}
}
