package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
)

// checkTransports fails t unless the report splits its subscribers into wsSubs over
// WebSocket and the rest over SSE, each transport receiving every event its rooms
// were acknowledged (no gap, nothing lost) with its figures filled in. A subscriber
// that has seen nothing when its first connection ends resumes from where that
// connection joined: over SSE from the stream's anchor, over WebSocket from the
// welcome.
func checkTransports(t *testing.T, rep Report, raw map[string]any, wsSubs int) map[string]*TransportResult {
	t.Helper()
	tr, ok := raw["transports"].(map[string]any)
	if !ok {
		t.Fatalf("JSON report lacks \"transports\": %v", raw)
	}
	for _, name := range []string{transportSSE, transportWS} {
		fields, ok := tr[name].(map[string]any)
		if !ok {
			t.Fatalf("transports lacks %q: %v", name, tr)
		}
		for _, k := range []string{"subscribers", "deliveries_per_sec", "p50_ms", "p99_ms", "max_ms", "gaps", "lost"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("transports.%s lacks %q", name, k)
			}
		}
	}
	want := map[string]int{transportSSE: rep.Subscribers - wsSubs, transportWS: wsSubs}
	for name, n := range want {
		x := rep.Transports[name]
		if x.Subscribers != n || x.Deliveries == 0 || x.Deliveries != x.ExpectedDeliveries || x.Gaps != 0 || x.Lost != 0 {
			t.Errorf("%s: %+v; want %d subscribers receiving every event, none lost", name, *x, n)
		}
		if x.DeliveriesPerSec <= 0 || x.P50ms <= 0 || x.P99ms < x.P50ms || x.MaxMs < x.P99ms {
			t.Errorf("%s: deliveries/s %.0f, p50 %.3f p99 %.3f max %.3f; want a rate and ordered quantiles",
				name, x.DeliveriesPerSec, x.P50ms, x.P99ms, x.MaxMs)
		}
	}
	if sum := rep.Transports[transportSSE].Deliveries + rep.Transports[transportWS].Deliveries; sum != rep.Deliveries {
		t.Errorf("transports deliver %d, the report %d", sum, rep.Deliveries)
	}
	return rep.Transports
}

// TestWSMixedRun: half of every room's members over WebSocket against a real
// gateway: both transports receive every event.
func TestWSMixedRun(t *testing.T) {
	pod := startPod(t, "pod")
	code, rep, raw, stderr := runMain(t, shortRun(pod.Public, "-subs", "40", "-rooms", "4", "-rate", "100", "-ws-share", "0.5")...)
	checkClean(t, code, rep, raw, stderr, "", 2*time.Second)
	if rep.Connected != 40 || rep.ConnectedAtEnd != 40 {
		t.Errorf("connected %d, at end %d; want 40", rep.Connected, rep.ConnectedAtEnd)
	}
	checkTransports(t, rep, raw, 20)
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{transportSSE, transportWS} {
		if !regexp.MustCompile(`(?m)^transport ` + name + ` +20 subscribers: deliveries [1-9]`).Match(b.Bytes()) {
			t.Errorf("no transport %s line in the table:\n%s", name, b.String())
		}
	}
}

// TestWSScenarioRollingDrain: two pods on one Redis, half of every room over
// WebSocket; draining pod a closes its WebSocket connections with 1012 as it ends
// its streams, and they resume on pod b without a loss.
func TestWSScenarioRollingDrain(t *testing.T) {
	redis := redistest.Standalone(t)
	a := startPod(t, "pod-a", "--redis", redis.Addr, "--pod-id", "pod-a")
	b := startPod(t, "pod-b", "--redis", redis.Addr, "--pod-id", "pod-b")
	code, rep, raw, stderr := runMain(t, "-scenario", "rolling-drain", "-url", a.Public, "-url", b.Public,
		"-admin-url", a.Admin, "-room-prefix", redistest.Prefix(t)+"-", "-ws-share", "0.5",
		"-subs", "40", "-rooms", "4", "-rate", "100", "-warmup", "0s", "-duration", "2s", "-progress", "0", "-bar", "off")
	checkClean(t, code, rep, raw, stderr, "rolling-drain", 2*time.Second)
	if len(rep.Drains) != 1 || rep.Drains[0].Error != "" || rep.Drains[0].Moved != 20 {
		t.Fatalf("drains = %+v; want pod a's 20 streams moved", rep.Drains)
	}
	tr := checkTransports(t, rep, raw, 20)
	// Subscriber i streams from pod i%2: 10 of each transport were on pod a.
	for _, name := range []string{transportSSE, transportWS} {
		if tr[name].Reconnects < 10 {
			t.Errorf("%s reconnects = %d, want pod a's 10 at least", name, tr[name].Reconnects)
		}
	}
	if rep.ConnectedAtEnd != 40 {
		t.Errorf("connected at end = %d, want all 40 on the surviving pod", rep.ConnectedAtEnd)
	}
}

// TestWSScenarioStorm: every stream ends at once, WebSocket connections included
// (shed: the server closes them with 1012; client: loadgen drops them), and all
// come back and resume.
func TestWSScenarioStorm(t *testing.T) {
	for _, via := range []string{stormShed, stormClient} {
		t.Run(via, func(t *testing.T) {
			pod := startPod(t, "pod")
			args := shortRun(pod.Public, "-scenario", "storm", "-subs", "40", "-rate", "50",
				"-duration", "3s", "-storm-at", "1s", "-ws-share", "0.5", "-storm-via", via)
			if via == stormShed {
				args = append(args, "-admin-url", pod.Admin)
			}
			code, rep, raw, stderr := runMain(t, args...)
			checkClean(t, code, rep, raw, stderr, "storm", 3*time.Second)
			if s := rep.Storm; s == nil || s.Via != via || s.Ended != 40 || s.Reconnected != 40 {
				t.Fatalf("storm = %+v; want via %s, 40 ended and back", rep.Storm, via)
			}
			tr := checkTransports(t, rep, raw, 20)
			if tr[transportWS].Reconnects < 20 || tr[transportSSE].Reconnects < 20 {
				t.Errorf("reconnects: sse %d, ws %d; want 20 each at least", tr[transportSSE].Reconnects, tr[transportWS].Reconnects)
			}
		})
	}
}

// TestWSIdle: -idle holds WebSocket connections too.
func TestWSIdle(t *testing.T) {
	pod := startPod(t, "pod")
	code, rep, _, stderr := runMain(t, "-url", pod.Public, "-idle", "-subs", "10", "-ws-share", "1", "-duration", "300ms", "-progress", "0", "-bar", "off")
	if code != exitOK || rep.Connected != 10 || rep.ConnectedAtEnd != 10 {
		t.Fatalf("exit %d, connected %d, at end %d; want 10 held\n%s", code, rep.Connected, rep.ConnectedAtEnd, stderr)
	}
	if ws := rep.Transports[transportWS]; ws == nil || ws.Subscribers != 10 {
		t.Errorf("transports = %+v; want 10 WebSocket subscribers", rep.Transports)
	}
}

// TestJSONReportTransportsFirst: "transports" repeats top-level names, so it comes
// before them on the line (see TestJSONReportTopLevelLast).
func TestJSONReportTransportsFirst(t *testing.T) {
	rep := Report{DeliveriesPerSec: 111, P50ms: 2.5, P99ms: 9.5, MaxMs: 12, Gaps: 3, Lost: 4, Subscribers: 5,
		Transports: map[string]*TransportResult{
			transportSSE: {Subscribers: 99, DeliveriesPerSec: 999, P50ms: 99, P99ms: 99, MaxMs: 99, Gaps: 99, Lost: 99},
			transportWS:  {Subscribers: 99, DeliveriesPerSec: 999, P50ms: 99, P99ms: 99, MaxMs: 99, Gaps: 99, Lost: 99},
		}}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"deliveries_per_sec": "111", "p50_ms": "2.5", "p99_ms": "9.5",
		"max_ms": "12", "gaps": "3", "lost": "4", "subscribers": "5"} {
		m := regexp.MustCompile(`.*"` + key + `":(-?[0-9.e+-]*)`).FindStringSubmatch(b.String())
		if m == nil || m[1] != want {
			t.Errorf("last %q on the line = %v, want the top level's %s:\n%s", key, m, want, b.String())
		}
	}
}

// TestIdleGoroutines: -metrics-url reads the pod's go_goroutines before connecting
// and at the plateau, while every connection is held: on the idle loop an idle SSE
// stream or WebSocket connection keeps no goroutine; off it keeps one at least.
func TestIdleGoroutines(t *testing.T) {
	const subs = 40
	for _, loop := range []string{"on", "off"} {
		for _, share := range []string{"0", "1"} {
			t.Run(loop+"/ws-share="+share, func(t *testing.T) {
				// A pod of its own: the goroutines of an earlier run's connections,
				// still ending, would count in "before" and not at the plateau.
				pod := startPod(t, "pod", "--idle-loop", loop)
				code, rep, raw, stderr := runMain(t, "-url", pod.Public, "-metrics-url", pod.Admin+"/metrics",
					"-idle", "-subs", strconv.Itoa(subs), "-ws-share", share, "-duration", "300ms", "-progress", "0", "-bar", "off")
				if code != exitOK || rep.ConnectedAtEnd != subs {
					t.Fatalf("exit %d, connected at end %d; want %d held\n%s", code, rep.ConnectedAtEnd, subs, stderr)
				}
				if _, ok := raw["server_goroutines"]; !ok || rep.GoroutinesBefore < 1 {
					t.Fatalf("goroutines before %d, at the plateau %v: want both read", rep.GoroutinesBefore, raw["server_goroutines"])
				}
				grown := rep.Goroutines - rep.GoroutinesBefore
				if loop == "off" && grown < subs {
					t.Errorf("--idle-loop %s: %d -> %d goroutines with %d connections held; want one each at least",
						loop, rep.GoroutinesBefore, rep.Goroutines, subs)
				}
				if loop == "on" && grown >= subs/2 {
					t.Errorf("--idle-loop on: %d -> %d goroutines with %d connections held; want far fewer than one each",
						rep.GoroutinesBefore, rep.Goroutines, subs)
				}
			})
		}
	}
}
