package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/roomcast/roomcast/cmd/loadgen/internal/hub"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if gatewayBin.dir != "" {
			_ = os.RemoveAll(gatewayBin.dir)
		}
		os.Exit(code)
	}))
}

// startHub serves the yardstick hub in-process.
func startHub(t *testing.T) *httptest.Server {
	t.Helper()
	h := hub.New()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return srv
}

func TestRunAgainstHub(t *testing.T) {
	tests := []struct {
		name  string
		batch int
		rooms int
		subs  int
	}{
		{name: "single publishes", batch: 1, rooms: 3, subs: 30},
		{name: "batch publishes", batch: 8, rooms: 4, subs: 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startHub(t)
			cfg := testConfig(srv.URL)
			cfg.Subs, cfg.Rooms, cfg.Batch = tt.subs, tt.rooms, tt.batch
			rep, err := run(t.Context(), cfg, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Lossy() || rep.Resyncs != 0 || rep.Reconnects != 0 {
				var b bytes.Buffer
				_ = rep.WriteTable(&b)
				t.Fatalf("loss or reconnects against the hub:\n%s", b.String())
			}
			if rep.Published == 0 || rep.PublishErrors != 0 || rep.Connected != int64(tt.subs) {
				t.Fatalf("published %d (errors %d), connected %d", rep.Published, rep.PublishErrors, rep.Connected)
			}
			perRoom := uint64(tt.subs / tt.rooms)
			if want := uint64(rep.Published) * perRoom; rep.Deliveries != want {
				t.Errorf("deliveries = %d, want published %d × %d subscribers per room = %d",
					rep.Deliveries, rep.Published, perRoom, want)
			}
			if rep.P99ms <= 0 || rep.MaxMs < rep.P99ms {
				t.Errorf("latency p99 %.3fms max %.3fms", rep.P99ms, rep.MaxMs)
			}
		})
	}
}

func TestRunIdle(t *testing.T) {
	srv := startHub(t)
	cfg := testConfig(srv.URL)
	cfg.Idle, cfg.Subs, cfg.Duration = true, 25, 50*time.Millisecond
	rep, err := run(t.Context(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Connected != 25 || rep.ConnectedAtEnd != 25 || rep.Published != 0 || rep.Deliveries != 0 {
		t.Errorf("connected %d (at end %d), published %d, deliveries %d",
			rep.Connected, rep.ConnectedAtEnd, rep.Published, rep.Deliveries)
	}
}

func TestRealMainJSON(t *testing.T) {
	srv := startHub(t)
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"-url", srv.URL, "-subs", "6", "-rooms", "2", "-rate", "200",
		"-warmup", "0s", "-duration", "300ms", "-progress", "0", "-json"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, stdout.String())
	}
	for _, k := range []string{"subscribers", "connected", "connect_errors", "published", "publish_errors",
		"deliveries", "deliveries_per_sec", "publishes_per_sec", "p50_ms", "p99_ms", "p999_ms", "max_ms",
		"gaps", "duplicates", "resyncs", "reconnects"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
}

func TestRealMainBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-rooms", "0"}, {"-url", "ftp://x"}, {"stray"}} {
		if code := realMain(args, io.Discard, io.Discard); code != exitError {
			t.Errorf("realMain(%q) = %d, want %d", args, code, exitError)
		}
	}
}

func testConfig(url string) Config {
	return Config{
		URL: url, Subs: 10, Rooms: 1, RoomPrefix: "load-", Rate: 300,
		Warmup: 0, Duration: 400 * time.Millisecond, BodySize: 32, Publishers: 4, Batch: 1,
		ConnectRate: 0, ConnectTimeout: 10 * time.Second, Settle: 10 * time.Second,
		RetryCap: 50 * time.Millisecond, MaxEvents: 1 << 20,
	}
}

// scripted is one connection of a scripted SSE server: the Last-Event-ID it must
// carry, the bytes to write, and whether to end the stream (else hold it open).
type scripted struct {
	lastID string
	frames string
	end    bool
}

// anchor is a stream's anchor at epoch:seq, as the gateway sends it to a stream
// opened without a resume point.
func anchor(epoch string, seq uint64) string {
	return fmt.Sprintf("id: %s:%d\nevent: anchor\ndata: {\"room\":\"r\",\"epoch\":%q,\"seq\":%d}\n\n", epoch, seq, epoch, seq)
}

func frame(epoch string, seq uint64) string {
	return fmt.Sprintf("id: %s:%d\ndata: {\"room\":\"r\",\"epoch\":%q,\"seq\":%d,\"ts\":1,\"type\":\"message\",\"body\":{\"t\":%d}}\n\n",
		epoch, seq, epoch, seq, time.Now().UnixNano())
}

// scriptServer plays conns in order and records the Last-Event-ID of each request.
func scriptServer(t *testing.T, conns []scripted) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(seen)
		seen = append(seen, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if n >= len(conns) {
			http.Error(w, "script over", http.StatusGone)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = io.WriteString(w, "retry: 5\n\n"+conns[n].frames)
		_ = http.NewResponseController(w).Flush()
		if !conns[n].end {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestSubscriberScripted(t *testing.T) {
	tests := []struct {
		name       string
		conns      []scripted
		target     uint64
		wantIDs    []string
		deliveries uint64
		gaps, dups uint64
		resyncs    uint64
		reconnects int64
	}{
		{
			name: "resumes after a clean end",
			conns: []scripted{
				{frames: frame("e", 1) + frame("e", 2) + frame("e", 3), end: true},
				{lastID: "e:3", frames: frame("e", 4) + frame("e", 5)},
			},
			target: 5, wantIDs: []string{"", "e:3"}, deliveries: 5, reconnects: 1,
		},
		{
			name: "resync without id moves the resume point",
			conns: []scripted{
				{frames: frame("e", 1) + frame("e", 2), end: true},
				{lastID: "e:2", frames: "event: resync\ndata: {\"room\":\"r\",\"epoch\":\"f\",\"seq\":10}\n\n", end: true},
				{lastID: "f:10", frames: frame("f", 11)},
			},
			target: 11, wantIDs: []string{"", "e:2", "f:10"}, deliveries: 3, resyncs: 1, reconnects: 2,
		},
		{
			name: "gap across a reconnect",
			conns: []scripted{
				{frames: frame("e", 1) + frame("e", 2), end: true},
				{lastID: "e:2", frames: frame("e", 5)},
			},
			target: 5, wantIDs: []string{"", "e:2"}, deliveries: 3, gaps: 2, reconnects: 1,
		},
		{
			name: "a stream that ends before its first event resumes from its anchor",
			conns: []scripted{
				{frames: anchor("e", 4), end: true},
				{lastID: "e:4", frames: frame("e", 5) + frame("e", 6)},
			},
			target: 6, wantIDs: []string{"", "e:4"}, deliveries: 2, reconnects: 1,
		},
		{
			name: "the first event after the anchor is checked for a gap",
			conns: []scripted{
				{frames: anchor("e", 4) + frame("e", 6)},
			},
			target: 6, wantIDs: []string{""}, deliveries: 1, gaps: 1,
		},
		{
			name: "duplicate replayed on resume",
			conns: []scripted{
				{frames: frame("e", 1) + frame("e", 2), end: true},
				{lastID: "e:2", frames: frame("e", 2) + frame("e", 3)},
			},
			target: 3, wantIDs: []string{"", "e:2"}, deliveries: 4, dups: 1, reconnects: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := scriptServer(t, tt.conns)
			cfg := testConfig(srv.URL)
			s := &subscriber{room: &room{name: "r", streamURL: srv.URL + "/rooms/r/events"}, hist: new(histogram)}
			ls := scriptedRun(t, &cfg, s, tt.target, false)

			if got := seen(); strings.Join(got, ",") != strings.Join(tt.wantIDs, ",") {
				t.Errorf("Last-Event-IDs = %q, want %q", got, tt.wantIDs)
			}
			want := counts{tt.deliveries, tt.gaps, tt.dups, tt.resyncs, tt.reconnects}
			if got := countsOf(s, ls); got != want {
				t.Errorf("counts %+v, want %+v", got, want)
			}
			if s.retry != 5*time.Millisecond {
				t.Errorf("retry = %v, want the server's 5ms", s.retry)
			}
		})
	}
}

// scriptedRun runs s, the one subscriber of cfg, until its room's target seq has
// arrived, or with fatal until it stops by itself, then ends it; it returns the
// run's shared state.
func scriptedRun(t *testing.T, cfg *Config, s *subscriber, target uint64, fatal bool) *loadState {
	t.Helper()
	cfg.Subs = 1
	ls := &loadState{cfg: cfg, subClient: &http.Client{Transport: newTransport(0)},
		allConnected: make(chan struct{}), settled: make(chan struct{})}
	defer ls.subClient.CloseIdleConnections()
	ls.pendingSettle.Store(1)
	s.room.target.Store(target)
	s.room.final.Store(true)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx, ls)
	}()
	until, what := ls.settled, "the subscriber never reached the target seq"
	if fatal {
		until, what = done, "the subscriber kept going after a fatal answer"
	}
	select {
	case <-until:
	case <-time.After(10 * time.Second):
		t.Error(what)
	}
	cancel()
	<-done
	return ls
}

// counts are the figures of a scripted subscriber.
type counts struct {
	deliveries, gaps, dups, resyncs uint64
	reconnects                      int64
}

func countsOf(s *subscriber, ls *loadState) counts {
	tr := &s.track
	return counts{s.deliveries.Load(), tr.Gaps(), tr.Duplicates, tr.Resyncs, ls.reconnects.Load()}
}

func TestSubscriberStopsOnRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"bad room"}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	for _, transport := range []string{transportSSE, transportWS} {
		t.Run(transport, func(t *testing.T) {
			cfg := testConfig(srv.URL)
			ls := &loadState{cfg: &cfg, subClient: &http.Client{Transport: newTransport(0)}}
			defer ls.subClient.CloseIdleConnections()
			s := &subscriber{room: &room{name: "r", streamURL: srv.URL + "/rooms/r/events"}}
			if transport == transportWS {
				s.ws = newWSState("run1", 0, "r") // the upgrade is answered 400
			}
			s.run(t.Context(), ls) // returns by itself
			if s.fatal == nil || ls.connectErrors.Load() != 1 {
				t.Errorf("fatal %v, connect errors %d; want a refusal after one attempt", s.fatal, ls.connectErrors.Load())
			}
		})
	}
}

func TestReportLossy(t *testing.T) {
	tests := []struct {
		name string
		rep  Report
		want bool
	}{
		{name: "clean", rep: Report{Deliveries: 10}},
		{name: "resyncs alone are explained", rep: Report{Resyncs: 3, Reconnects: 2}},
		{name: "gap", rep: Report{Gaps: 1}, want: true},
		{name: "duplicate", rep: Report{Duplicates: 1}, want: true},
		{name: "out of order", rep: Report{Late: 1}, want: true},
		{name: "unannounced epoch change", rep: Report{EpochChanges: 1}, want: true},
		{name: "malformed frame", rep: Report{Malformed: 1}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rep.Lossy(); got != tt.want {
				t.Errorf("Lossy() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseRSS(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{name: "status file", in: "Name:\tgateway\nVmPeak:\t 1 kB\nVmRSS:\t   12345 kB\nThreads:\t8\n", want: 12345},
		{name: "no VmRSS", in: "Name:\tx\n", wantErr: true},
		{name: "bad unit", in: "VmRSS:\t12 MB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRSS(strings.NewReader(tt.in), "status")
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseRSS = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestEpochOfID(t *testing.T) {
	if e, ok := epochOfID([]byte("k3x9q:48")); !ok || string(e) != "k3x9q" {
		t.Errorf("epochOfID = %q, %v", e, ok)
	}
}

// A run against nothing measured nothing: it must not exit 0 with a clean report.
func TestRealMainAgainstNothingFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nobody listens there now
	for _, args := range [][]string{
		{"-subs", "3", "-connect-timeout", "1s"},
		{"-subs", "0"},
	} {
		var stderr bytes.Buffer
		args = append([]string{"-url", url, "-rate", "50", "-warmup", "0s", "-duration", "300ms", "-progress", "0"}, args...)
		if code := realMain(args, io.Discard, &stderr); code != exitError || !strings.Contains(stderr.String(), "measured nothing") {
			t.Errorf("realMain(%q) = %d, want %d; stderr:\n%s", args, code, exitError, stderr.String())
		}
	}
}
