package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

// gatewayBin is the gateway binary the scenario tests run, built once per test binary
// into a directory TestMain removes.
var gatewayBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// requireGatewayBin builds ./cmd/gateway on first use.
func requireGatewayBin(t *testing.T) string {
	t.Helper()
	gatewayBin.once.Do(func() {
		gatewayBin.dir, gatewayBin.err = os.MkdirTemp("", "loadgen-gateway-")
		if gatewayBin.err == nil {
			gatewayBin.path, gatewayBin.err = gatewaytest.Build(gatewayBin.dir)
		}
	})
	if gatewayBin.err != nil {
		t.Fatalf("the gateway does not build: %v", gatewayBin.err)
	}
	return gatewayBin.path
}

// podFlags keep the drain short and the retry hint small, so a test's reconnects
// and drains finish in well under a second.
var podFlags = []string{
	"--retry-min", "100ms", "--retry-max", "200ms",
	"--heartbeat", "1s",
	"--drain-delay", "0s", "--drain-window", "200ms", "--drain-timeout", "5s",
}

// startPod starts a real gateway process, embedded unless extra names --redis.
func startPod(t *testing.T, name string, extra ...string) *gatewaytest.Process {
	t.Helper()
	return gatewaytest.Start(t, gatewaytest.Options{
		Name: name, Bin: requireGatewayBin(t), Args: append(append([]string(nil), podFlags...), extra...),
	})
}

// runMain runs loadgen with args and returns its exit code, the JSON report (the
// last line of stdout) and stderr.
func runMain(t *testing.T, args ...string) (int, Report, map[string]any, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := realMain(append(args, "-json"), &stdout, &stderr)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := []byte(lines[len(lines)-1])
	var rep Report
	var raw map[string]any
	if err := json.Unmarshal(last, &rep); err != nil {
		t.Fatalf("exit %d; last line of stdout is not the JSON report: %v\nstdout:\n%s\nstderr:\n%s",
			code, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal(last, &raw); err != nil {
		t.Fatal(err)
	}
	return code, rep, raw, stderr.String()
}

// checkClean fails t unless the run exited 0 with every loss counter at zero, no
// publish error, and the agreed report fields present.
func checkClean(t *testing.T, code int, rep Report, raw map[string]any, stderr, scenario string, d time.Duration) {
	t.Helper()
	for _, k := range []string{"scenario", "egress_bytes_per_sec", "timeline", "deliveries_per_sec", "subscribers", "p99_ms", "lost"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if code != exitOK || rep.Lossy() || rep.Lost != 0 || rep.PublishErrors != 0 {
		var b bytes.Buffer
		_ = rep.WriteTable(&b)
		t.Fatalf("exit %d, lost %d, publish errors %d:\n%s\nstderr:\n%s", code, rep.Lost, rep.PublishErrors, b.String(), stderr)
	}
	if rep.Scenario != scenario {
		t.Errorf("scenario = %q, want %q", rep.Scenario, scenario)
	}
	if rep.Published == 0 || rep.DeliveriesPerSec <= 0 || rep.EgressBytesPerSec <= 0 {
		t.Errorf("published %d, deliveries/s %.0f, egress bytes/s %.0f: want all > 0",
			rep.Published, rep.DeliveriesPerSec, rep.EgressBytesPerSec)
	}
	checkTimeline(t, rep, d)
	var delivered float64
	for _, p := range rep.Timeline {
		delivered += p.DeliveriesPerSec
	}
	if delivered <= 0 {
		t.Errorf("timeline shows no deliveries: %+v", rep.Timeline)
	}
}

// checkTimeline fails t unless the timeline has one point per second of the
// measured window: point k (from 1) closes second k, late by less than a second
// on a loaded machine, and the last point, which may close a shorter interval,
// closes the window. The window lasts the requested d, or longer while a
// scenario's action runs.
func checkTimeline(t *testing.T, rep Report, d time.Duration) {
	t.Helper()
	tl := rep.Timeline
	lo := int(math.Ceil(d.Seconds()))
	hi := max(lo, int(math.Ceil(rep.MeasuredSeconds)))
	if len(tl) < lo || len(tl) > hi {
		t.Errorf("timeline has %d points for a %.3fs window of %s requested, want %d..%d: %+v", len(tl), rep.MeasuredSeconds, d, lo, hi, tl)
		return
	}
	for i, p := range tl[:len(tl)-1] {
		if p.T < float64(i+1) || p.T >= float64(i+2) {
			t.Errorf("point %d at t=%.3f, want in [%d, %d): %+v", i, p.T, i+1, i+2, tl)
		}
	}
	if last := tl[len(tl)-1].T; math.Abs(last-rep.MeasuredSeconds) > 0.2 {
		t.Errorf("last point at t=%.3f, want the window's end %.3f", last, rep.MeasuredSeconds)
	}
}

// shortRun is what every scenario test adds: a short window, no progress output.
func shortRun(url string, extra ...string) []string {
	return append([]string{"-url", url, "-warmup", "0s", "-duration", "2s", "-progress", "0", "-bar", "off"}, extra...)
}

func TestScenarioFanoutEmbedded(t *testing.T) {
	pod := startPod(t, "pod")
	dir := t.TempDir()
	code, rep, raw, stderr := runMain(t, shortRun(pod.Public, "-scenario", "fanout", "-subs", "40", "-rate", "50", "-plot", dir)...)
	checkClean(t, code, rep, raw, stderr, "fanout", 2*time.Second)
	if rep.Subscribers != 40 || rep.Connected != 40 {
		t.Errorf("subscribers %d, connected %d; want 40", rep.Subscribers, rep.Connected)
	}
	// Fan-out: one room, so every publish reaches every subscriber.
	if want := uint64(rep.Published) * 40; rep.ExpectedDeliveries != want || rep.Deliveries != want {
		t.Errorf("deliveries %d (expected %d), want %d", rep.Deliveries, rep.ExpectedDeliveries, want)
	}
	for _, name := range plotFiles {
		checkPNG(t, dir+"/"+name)
	}
}

func TestScenarioManyRoomsEmbedded(t *testing.T) {
	pod := startPod(t, "pod")
	code, rep, raw, stderr := runMain(t, shortRun(pod.Public, "-scenario", "many-rooms", "-rooms", "100", "-rate", "200")...)
	checkClean(t, code, rep, raw, stderr, "many-rooms", 2*time.Second)
	// The scenario's two members per room, unless -subs says otherwise.
	if rep.Subscribers != 200 || rep.Connected != 200 {
		t.Errorf("subscribers %d, connected %d; want 2 per room = 200", rep.Subscribers, rep.Connected)
	}
}

func TestScenarioSoakEmbedded(t *testing.T) {
	pod := startPod(t, "pod")
	code, rep, raw, stderr := runMain(t, shortRun(pod.Public, "-scenario", "soak", "-subs", "20", "-rate", "50", "-report-every", "500ms")...)
	checkClean(t, code, rep, raw, stderr, "soak", 2*time.Second)
	var lines int
	for l := range strings.Lines(stderr) {
		if strings.HasPrefix(l, "soak ") {
			lines++
			if !strings.Contains(l, "anomalies 0") {
				t.Errorf("periodic line reports anomalies: %q", l)
			}
		}
	}
	if lines < 2 {
		t.Errorf("%d periodic soak lines in a 2s run every 500ms, want >= 2; stderr:\n%s", lines, stderr)
	}
}

func TestScenarioStorm(t *testing.T) {
	tests := []struct {
		name  string
		admin bool
		via   string
	}{
		{name: "server sheds every stream", admin: true, via: stormShed},
		{name: "clients close every stream", via: stormClient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := startPod(t, "pod")
			args := shortRun(pod.Public, "-scenario", "storm", "-subs", "50", "-rate", "50", "-duration", "3s", "-storm-at", "1s")
			if tt.admin {
				args = append(args, "-admin-url", pod.Admin)
			} else {
				args = append(args, "-storm-via", tt.via)
			}
			code, rep, raw, stderr := runMain(t, args...)
			checkClean(t, code, rep, raw, stderr, "storm", 3*time.Second)
			s := rep.Storm
			if s == nil {
				t.Fatalf("no storm in the report: %s", stderr)
			}
			if s.Via != tt.via || s.Ended != 50 || s.Reconnected != 50 || s.ReconnectSeconds <= 0 || s.ReconnectsPerSec <= 0 {
				t.Errorf("storm = %+v; want via %s, 50 ended and reconnected, a duration and a rate", *s, tt.via)
			}
			if rep.Reconnects < 50 {
				t.Errorf("reconnects = %d, want >= 50", rep.Reconnects)
			}
			var reconnects int64
			for _, p := range rep.Timeline {
				reconnects += p.Reconnects
			}
			if reconnects < 50 {
				t.Errorf("timeline counts %d reconnects, want >= 50: %+v", reconnects, rep.Timeline)
			}
		})
	}
}

func TestScenarioRollingDrain(t *testing.T) {
	redis := redistest.Standalone(t)
	a := startPod(t, "pod-a", "--redis", redis.Addr, "--pod-id", "pod-a")
	b := startPod(t, "pod-b", "--redis", redis.Addr, "--pod-id", "pod-b")
	code, rep, raw, stderr := runMain(t, "-scenario", "rolling-drain", "-url", a.Public, "-url", b.Public,
		"-admin-url", a.Admin, "-room-prefix", redistest.Prefix(t)+"-",
		"-subs", "40", "-rooms", "4", "-rate", "100", "-warmup", "0s", "-duration", "2s", "-progress", "0", "-bar", "off")
	checkClean(t, code, rep, raw, stderr, "rolling-drain", 2*time.Second)
	if len(rep.Drains) != 1 {
		t.Fatalf("drains = %+v, want one", rep.Drains)
	}
	d := rep.Drains[0]
	if d.URL != a.Public || d.Error != "" || d.Moved != 20 || d.Seconds <= 0 {
		t.Errorf("drain = %+v; want pod a's 20 streams moved, no error", d)
	}
	if _, err := a.Wait(10 * time.Second); err != nil {
		t.Errorf("the drained pod did not exit: %v", err)
	}
	if rep.ConnectedAtEnd != 40 {
		t.Errorf("connected at end = %d, want all 40 on the surviving pod", rep.ConnectedAtEnd)
	}
}

// TestScenarioRebalance: three loaded pods and an empty one, all with
// --rebalance: the run's streams start on the first three, the fourth joins, the
// loaded ones shed to it (a shed stream reconnects to the least loaded pod) until
// max/mean ≤ 1.2, and nothing is lost.
func TestScenarioRebalance(t *testing.T) {
	redis := redistest.Standalone(t) // the fleet's record of connections is one key: a Redis of its own
	var args []string
	var pods []*gatewaytest.Process
	for _, name := range []string{"pod-a", "pod-b", "pod-c", "pod-d"} {
		p := startPod(t, name, "--redis", redis.Addr, "--pod-id", name, "--max-streams-per-ip", "0",
			"--rebalance", "--rebalance-rate", "10", "--occupancy-interval", "200ms")
		pods = append(pods, p)
		args = append(args, "-url", p.Public, "-admin-url", p.Admin)
	}
	code, rep, raw, stderr := runMain(t, append(args, "-scenario", "rebalance", "-room-prefix", redistest.Prefix(t)+"-",
		"-subs", "60", "-rooms", "6", "-rate", "50", "-warmup", "0s", "-duration", "2s", "-rebalance-wait", "40s",
		"-progress", "0", "-bar", "off")...)
	checkClean(t, code, rep, raw, stderr, "rebalance", 2*time.Second)
	rb := rep.Rebalance
	if rb == nil {
		t.Fatalf("no rebalance result; raw %v", raw["rebalance"])
	}
	if !rb.Converged || rb.MaxOverMean > rebalanceTarget || rb.Joined != pods[3].Public {
		t.Fatalf("rebalance = %+v; want pod d joined and max/mean <= %.1f", rb, rebalanceTarget)
	}
	// The loaded pods may have shed among themselves before the join (pod d's
	// record of no streams counts in the mean from its start): the sum is the run's.
	if j := rb.StreamsAtJoin; len(j) != 4 || j[0]+j[1]+j[2] != 60 || j[3] != 0 {
		t.Errorf("streams at the join %v, want 60 on the first three pods", j)
	}
	if rb.StreamsAtEnd[3] == 0 || len(rb.Series) == 0 {
		t.Errorf("the joined pod holds %d streams at the end; series %v", rb.StreamsAtEnd[3], rb.Series)
	}
	var sheds int64
	for i, n := range rb.Sheds {
		if n < 0 {
			t.Errorf("pod %d's sheds unread", i)
		}
		sheds += n
	}
	if sheds == 0 {
		t.Errorf("sheds %v: the joined pod took %d streams, yet no pod shed", rb.Sheds, rb.StreamsAtEnd[3])
	}
	if rep.Duplicates != 0 {
		t.Errorf("%d duplicates", rep.Duplicates)
	}
	t.Logf("balanced in %.1fs: %v -> %v, sheds %v", rb.Seconds, rb.StreamsAtJoin, rb.StreamsAtEnd, rb.Sheds)
}

// TestScenarioRebalanceUnbalanced: pods that do not rebalance leave the joined pod
// empty: the run says so and exits 1, though nothing was lost.
func TestScenarioRebalanceUnbalanced(t *testing.T) {
	redis := redistest.Standalone(t)
	a := startPod(t, "pod-a", "--redis", redis.Addr, "--pod-id", "pod-a")
	b := startPod(t, "pod-b", "--redis", redis.Addr, "--pod-id", "pod-b")
	code, rep, _, stderr := runMain(t, "-scenario", "rebalance", "-url", a.Public, "-url", b.Public, "-room-prefix", redistest.Prefix(t)+"-",
		"-subs", "10", "-rooms", "2", "-rate", "20", "-warmup", "0s", "-duration", "1s", "-rebalance-wait", "1s",
		"-progress", "0", "-bar", "off")
	if code != exitLossy || rep.Lost != 0 || !strings.Contains(stderr, "not balanced") {
		t.Fatalf("exit %d, lost %d, stderr %q; want exit 1 for pods not balanced, nothing lost", code, rep.Lost, stderr)
	}
	if rb := rep.Rebalance; rb == nil || rb.Converged || rb.Error == "" || rb.MaxOverMean <= rebalanceTarget {
		t.Fatalf("rebalance = %+v; want not converged, the streams still on pod a", rb)
	}
}

func TestScenarioDefaults(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(c Config) bool
	}{
		{name: "no scenario keeps the plain defaults", args: nil,
			want: func(c Config) bool { return c.Scenario == "" && c.Subs == 100 && c.Rooms == 1 && c.Rate == 100 }},
		{name: "fanout", args: []string{"-scenario", "fanout"},
			want: func(c Config) bool { return c.Subs == 1000 && c.Rooms == 1 && c.Rate > 0 }},
		{name: "many-rooms", args: []string{"-scenario", "many-rooms"},
			want: func(c Config) bool { return c.Rooms == 10000 && c.Subs == 20000 }},
		{name: "many-rooms keeps two members per room given -rooms", args: []string{"-scenario", "many-rooms", "-rooms", "50"},
			want: func(c Config) bool { return c.Rooms == 50 && c.Subs == 100 }},
		{name: "flags win", args: []string{"-scenario", "fanout", "-subs", "7", "-rate", "3"},
			want: func(c Config) bool { return c.Subs == 7 && c.Rate == 3 && c.Rooms == 1 }},
		{name: "storm reconnects at once", args: []string{"-scenario", "storm"},
			want: func(c Config) bool { return c.RetryCap <= minRetry && c.StormVia == stormClient && c.StormAt > 0 }},
		{name: "storm sheds through the admin listener", args: []string{"-scenario", "storm", "-admin-url", "http://127.0.0.1:9090"},
			want: func(c Config) bool { return c.StormVia == stormShed }},
		{name: "soak reports periodically", args: []string{"-scenario", "soak"},
			want: func(c Config) bool { return c.Duration >= time.Hour && c.ReportEvery > 0 }},
		{name: "rebalance", args: []string{"-scenario", "rebalance", "-url", "http://a", "-url", "http://b"},
			want: func(c Config) bool { return c.Subs == 3000 && c.Rooms == 300 && c.RebalanceWait > 0 }},
		{name: "rolling-drain", args: []string{"-scenario", "rolling-drain", "-url", "http://a", "-url", "http://b", "-admin-url", "http://a:9"},
			want: func(c Config) bool { return len(c.URLs) == 2 && c.URL == "http://a" && len(c.AdminURLs) == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(c) {
				t.Errorf("config = %+v", c)
			}
		})
	}
}

func TestScenarioBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "nope"},
		{"-scenario", "rolling-drain"}, // one pod
		{"-scenario", "rolling-drain", "-url", "http://a", "-url", "http://b"},                                                         // nothing drains
		{"-scenario", "rolling-drain", "-url", "http://a", "-url", "http://b", "-admin-url", "http://a:9", "-admin-url", "http://b:9"}, // nobody left
		{"-scenario", "rebalance"},                   // one pod: nobody joins
		{"-scenario", "storm", "-storm-via", "shed"}, // no admin URL
		{"-scenario", "storm", "-storm-via", "sideways"},
		{"-bar", "sometimes"},
		{"-plot", "/dev/null/x", "-idle"}, // nothing to plot
	} {
		if code := realMain(args, io.Discard, io.Discard); code != exitError {
			t.Errorf("realMain(%q) = %d, want %d", args, code, exitError)
		}
	}
}

// TestJSONReportTopLevelLast guards the .ci scripts, which take a number from the
// one-line JSON report with a greedy sed or grep | tail -1, that is the last
// occurrence of "name": on the line: the timeline repeats names of the top level
// (deliveries_per_sec, p99_ms, reconnects), so it must come before them.
func TestJSONReportTopLevelLast(t *testing.T) {
	rep := Report{Scenario: "storm", DeliveriesPerSec: 111, P50ms: 2.5, P99ms: 9.5, Reconnects: 7, PublishesPerSec: 5,
		Timeline: []TimelinePoint{{T: 1, DeliveriesPerSec: 999, P50ms: 99, P99ms: 999, Reconnects: 99}},
		Storm:    &StormResult{Via: stormShed, Ended: 99, Reconnected: 99, ReconnectsPerSec: 999},
		Drains:   []DrainResult{{URL: "http://a", Moved: 99, Seconds: 9}}}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	line := b.String()
	for key, want := range map[string]string{"deliveries_per_sec": "111", "p50_ms": "2.5", "p99_ms": "9.5",
		"reconnects": "7", "publishes_per_sec": "5"} {
		m := regexp.MustCompile(`.*"` + key + `":(-?[0-9.e+-]*)`).FindStringSubmatch(line)
		if m == nil || m[1] != want {
			got := "none"
			if m != nil {
				got = m[1]
			}
			t.Errorf("last %q on the line = %s, want the top level's %s:\n%s", key, got, want, line)
		}
	}
}

// TestScenarioStormRefused: a storm whose shed is refused (the pod wants an admin
// token the run does not have) ended nothing and tested nothing: exit 2, with the
// report printed all the same.
func TestScenarioStormRefused(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"unauthorized","message":"admin token required"}`))
	}))
	t.Cleanup(refuse.Close)
	pod := startPod(t, "pod")
	args := shortRun(pod.Public, "-scenario", "storm", "-subs", "10", "-rate", "20", "-duration", "2s", "-storm-at", "1s",
		"-admin-url", refuse.URL)
	code, rep, _, stderr := runMain(t, args...)
	if code != exitError || !strings.Contains(stderr, "did not run as asked") {
		t.Fatalf("exit %d, stderr %q; want %d and the storm named", code, stderr, exitError)
	}
	if rep.Storm == nil || rep.Storm.Error == "" {
		t.Fatalf("storm %+v; want its error in the report", rep.Storm)
	}
}
