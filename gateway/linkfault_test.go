package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/polltest"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// Link faults between gateway processes and Redis: each pod reaches Redis through a
// toxiproxy proxy of its own (redistest.Proxy), subscribers of every room on the
// faulty pod and on a clean one feed the loss audit, and publishers go through the
// clean pod. The faulty pod must notice, reconnect, resubscribe and repair, so that
// every subscriber gets every acknowledged event or an explicit resync.

// podBin is the gateway binary the link-fault tests launch, built once.
var podBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func gatewayBinary(t *testing.T) string {
	t.Helper()
	podBin.once.Do(func() {
		if podBin.dir, podBin.err = os.MkdirTemp("", "roomcast-linkfault-"); podBin.err == nil {
			podBin.path, podBin.err = gatewaytest.Build(podBin.dir)
		}
	})
	if podBin.err != nil {
		t.Fatal(podBin.err)
	}
	return podBin.path
}

// removeGatewayBinary removes what gatewayBinary built (TestMain).
func removeGatewayBinary() {
	if podBin.dir != "" {
		_ = os.RemoveAll(podBin.dir)
	}
}

// logWatch records when a process logged a line holding a message.
type logWatch struct {
	mu   sync.Mutex
	msgs []string
	seen map[string][]time.Time
}

func newLogWatch(msgs ...string) *logWatch {
	return &logWatch{msgs: msgs, seen: map[string][]time.Time{}}
}

func (w *logWatch) onLog(line []byte) {
	now := time.Now()
	for _, m := range w.msgs {
		if bytes.Contains(line, []byte(`"msg":"`+m)) {
			w.mu.Lock()
			w.seen[m] = append(w.seen[m], now)
			w.mu.Unlock()
		}
	}
}

// firstAfter returns the first time msg was logged at or after from.
func (w *logWatch) firstAfter(msg string, from time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.seen[msg] {
		if !at.Before(from) {
			return at, true
		}
	}
	return time.Time{}, false
}

// Messages the link-fault tests watch for.
const (
	msgSubLost = "room subscription lost"
	msgDown    = "redis backend unreachable"
)

// linkPod launches a gateway process whose Redis seed is addr, with short
// heartbeats and retry: hints, no admission limits, and occupancy records every
// 500ms; stopping it closes its streams at once.
func linkPod(t *testing.T, name, addr string, w *logWatch, extra ...string) *gatewaytest.Process {
	t.Helper()
	args := append([]string{"--redis", addr, "--heartbeat", "1s", "--retry-min", "100ms", "--retry-max", "200ms",
		"--accept-rate", "0", "--max-streams-per-ip", "0", "--occupancy-interval", "500ms",
		"--drain-delay", "0", "--drain-window", "0"}, extra...)
	o := gatewaytest.Options{Name: name, Bin: gatewayBinary(t), Args: args}
	if w != nil {
		o.OnLog = w.onLog
	}
	return gatewaytest.Start(t, o)
}

// publishOne publishes one event to room through p and fails t unless it is
// acknowledged.
func publishOne(t *testing.T, p *gatewaytest.Process, room string) {
	t.Helper()
	res, err := http.Post(p.Public+"/rooms/"+room+"/events", "application/json", strings.NewReader(`{"probe":true}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("publish through %s: status %d", p.Name, res.StatusCode)
	}
}

// blackholeRun is one blackhole: traffic from 20 rooms' subscribers on the faulty
// pod and the clean one, publishes through the clean pod (retried until
// acknowledged), the blackhole held until the faulty pod reports a lost
// subscription, then lifted.
func blackholeRun(t *testing.T, faulty, clean *gatewaytest.Process, w *logWatch, holes func(rooms []string) []*redistest.Proxy) {
	tr := newTrafficAt(t, []string{clean.Public}, [][]string{{faulty.Public}, {clean.Public}}, 0, 20)
	tr.mustAck = true
	pubStop := make(chan struct{})
	tr.publish(100, pubStop)
	time.Sleep(time.Second) // traffic before the fault: a duration, not a sync point

	resubs := scrape(t, faulty.Admin).Value("roomcast_redis_resubscribes_total")
	start := time.Now()
	var lift []func()
	for _, p := range holes(tr.rooms) {
		lift = append(lift, p.Blackhole(t))
	}
	// The pod's own pings find the link dead (rueidis: a PING after Dialer.KeepAlive
	// of silence, unanswered within ConnWriteTimeout): well within 20s. TCP keepalive
	// never would here (the proxy's kernel answers it), and a 30s keepalive with
	// rueidis's timeout of ten keepalives took up to 5.5 minutes.
	var lost time.Time
	if err := polltest.Until(20*time.Second, func() bool {
		var ok bool
		lost, ok = w.firstAfter(msgSubLost, start)
		return ok
	}); err != nil {
		t.Fatalf("the faulty pod did not notice its blackholed link within 20s")
	}
	down, _ := w.firstAfter(msgDown, start)
	// The pod's reconnects meet the blackhole for a while: each is bounded too.
	time.Sleep(2 * time.Second)
	for _, f := range lift {
		f()
	}
	lifted := time.Now()
	back := recovered(tr, faulty, resubs, pubStop, 30*time.Second)
	// The command connection works again too.
	publishOne(t, faulty, tr.rooms[0])
	t.Logf("blackhole: health down after %s, subscription lost after %s; lifted at %s, resubscribed %s later",
		sinceOrNone(down, start), lost.Sub(start).Round(time.Millisecond), lifted.Sub(start).Round(time.Millisecond),
		back.Sub(lifted).Round(time.Millisecond))
}

// recovered waits until p has subscribed again (its resubscriptions passed
// resubs), lets the traffic run a second more, stops the publishers and settles
// within settle; it returns when p had subscribed again.
func recovered(tr *traffic, p *gatewaytest.Process, resubs float64, pubStop chan struct{}, settle time.Duration) time.Time {
	t := tr.t
	t.Helper()
	replaytest.Eventually(t, 30*time.Second, p.Name+" resubscribed", func() bool {
		return scrape(t, p.Admin).Value("roomcast_redis_resubscribes_total") > resubs
	})
	back := time.Now()
	time.Sleep(time.Second) // traffic after the repair: a duration, not a sync point
	close(pubStop)
	tr.settle(settle)
	return back
}

func sinceOrNone(at, start time.Time) string {
	if at.IsZero() {
		return "(not reported)"
	}
	return at.Sub(start).Round(time.Millisecond).String()
}

// TestLinkBlackholeStandalone: the faulty pod's link to a standalone Redis drops
// every byte, without a FIN, for longer than its read timeout.
func TestLinkBlackholeStandalone(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	bad, good := redistest.Proxied(t, srv), redistest.Proxied(t, srv)
	w := newLogWatch(msgSubLost, msgDown)
	faulty := linkPod(t, "faulty", bad.Addr, w)
	clean := linkPod(t, "clean", good.Addr, nil)
	blackholeRun(t, faulty, clean, w, func([]string) []*redistest.Proxy { return []*redistest.Proxy{bad} })
}

// TestLinkBlackholeCluster: the same against a 3+3 cluster whose nodes announce
// their proxies, so that every pod reaches every node through them after any
// redirection. The blackhole falls on the link to the primary of the first room's
// shard; the other shards' links stay clean. A cluster names one address per node
// to all its clients, so a node's proxy cannot tell pods apart: the clean pod's
// link to that node is blackholed too, and its publishes to that shard stall and
// are retried meanwhile.
func TestLinkBlackholeCluster(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterConfig{})
	cp := redistest.ProxyCluster(t, c)
	w := newLogWatch(msgSubLost, msgDown)
	faulty := linkPod(t, "faulty", cp.Addrs()[0], w)
	clean := linkPod(t, "clean", cp.Addrs()[1], nil)
	blackholeRun(t, faulty, clean, w, func(rooms []string) []*redistest.Proxy {
		return []*redistest.Proxy{cp.For(c.NodeForKey(t, "room:{"+rooms[0]+"}"))}
	})
}

// meanOf returns a histogram's mean over what was observed between two scrapes.
func meanOf(before, after gatewaytest.Metrics, name string, labels ...string) (time.Duration, float64) {
	n := after.Value(name+"_count", labels...) - before.Value(name+"_count", labels...)
	if n <= 0 {
		return 0, 0
	}
	s := after.Value(name+"_sum", labels...) - before.Value(name+"_sum", labels...)
	return time.Duration(s / n * float64(time.Second)), n
}

// TestLinkLatency: every pod's link to Redis delays what Redis sends by 200ms to
// 1s (600ms ± 400ms) for 10s (30s with ROOMCAST_MEASURE=1) under 100 events/s. No
// event is lost or delivered twice, and the delay shows in the publish calls'
// durations (roomcast_redis_call_duration_seconds) and in
// roomcast_publish_to_deliver_seconds.
func TestLinkLatency(t *testing.T) {
	hold := 10 * time.Second
	if os.Getenv("ROOMCAST_MEASURE") == "1" {
		hold = 30 * time.Second
	}
	srv := redistest.SharedStandalone(t)
	pa, pb := redistest.Proxied(t, srv), redistest.Proxied(t, srv)
	a := linkPod(t, "a", pa.Addr, nil)
	b := linkPod(t, "b", pb.Addr, nil)
	tr := newTrafficAt(t, []string{b.Public}, [][]string{{a.Public}, {b.Public}}, 0, 20)
	tr.mustAck = true
	pubStop := make(chan struct{})
	// Enough publishers that 100/s go on while each publish waits a round trip.
	tr.ledger.Publish(gatewaytest.Publishers{Targets: tr.targets, Rooms: tr.rooms, Rate: 100, Workers: 100, Key: "pub", MustAck: true}, pubStop)
	time.Sleep(time.Second) // traffic before the fault: a duration, not a sync point

	beforeA, beforeB := scrape(t, a.Admin), scrape(t, b.Admin)
	for _, p := range []*redistest.Proxy{pa, pb} {
		p.Latency(t, 600*time.Millisecond, 400*time.Millisecond, redistest.Downstream)
	}
	time.Sleep(hold) // traffic through the slow links
	afterA, afterB := scrape(t, a.Admin), scrape(t, b.Admin)
	close(pubStop)
	tr.settle(30 * time.Second)

	deliverA, nA := meanOf(beforeA, afterA, "roomcast_publish_to_deliver_seconds")
	deliverB, nB := meanOf(beforeB, afterB, "roomcast_publish_to_deliver_seconds")
	lagA, _ := meanOf(beforeA, afterA, "roomcast_fanout_lag_seconds")
	pub, nPub := meanOf(beforeB, afterB, "roomcast_redis_call_duration_seconds", "op", "publish")
	t.Logf("latency 600±400ms for %s: mean publish call %s (%.0f calls); mean publish-to-deliver %s on a (%.0f frames), %s on b (%.0f); mean fan-out lag on a %s",
		hold, pub.Round(time.Millisecond), nPub, deliverA.Round(time.Millisecond), nA, deliverB.Round(time.Millisecond), nB, lagA.Round(time.Microsecond))
	// The delay is there to see: every reply and every doorbell waited at least
	// 200ms. (roomcast_fanout_lag_seconds starts at the doorbell's arrival, so it
	// does not show a slow link.)
	if pub < 200*time.Millisecond || deliverA < 200*time.Millisecond || deliverB < 200*time.Millisecond {
		t.Errorf("the link's delay does not show: publish call %s, publish-to-deliver %s and %s; want at least 200ms each", pub, deliverA, deliverB)
	}
}

// TestLinkBandwidthOutputLimit: the faulty pod's link carries at most 32 KB/s from
// Redis while 16 KB events are published to its rooms at 40/s, so Redis buffers for
// its subscriber connection until the pub/sub output-buffer limit (set small) closes
// it. The pod subscribes again and repairs from the log; once the ballast stops and
// the link is freed, nothing is missing.
func TestLinkBandwidthOutputLimit(t *testing.T) {
	srv := redistest.Standalone(t)
	if _, err := srv.Do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 256kb 64kb 1"); err != nil {
		t.Fatal(err)
	}
	bad, good := redistest.Proxied(t, srv), redistest.Proxied(t, srv)
	faulty := linkPod(t, "faulty", bad.Addr, nil)
	clean := linkPod(t, "clean", good.Addr, nil)
	tr := newTrafficAt(t, []string{clean.Public}, [][]string{{faulty.Public}, {clean.Public}}, 0, 8)
	tr.mustAck = true
	pubStop := make(chan struct{})
	tr.publish(50, pubStop)
	time.Sleep(time.Second) // traffic before the fault

	closed0 := outputLimitClosures(t, srv)
	resubs := scrape(t, faulty.Admin).Value("roomcast_redis_resubscribes_total")
	start := time.Now()
	free := bad.Bandwidth(t, redistest.Downstream, 32)
	ballastStop := make(chan struct{})
	tr.ledger.Publish(gatewaytest.Publishers{Targets: []string{clean.Public}, Rooms: tr.rooms, Rate: 40, Workers: 4,
		Key: "ballast", MustAck: true, Pad: 16 << 10}, ballastStop)
	replaytest.Eventually(t, 60*time.Second, "Redis closed a subscriber over its output-buffer limit", func() bool {
		return outputLimitClosures(t, srv) > closed0
	})
	closedAt := time.Now()
	close(ballastStop)
	free()
	freed := time.Now()
	back := recovered(tr, faulty, resubs, pubStop, 60*time.Second)
	t.Logf("bandwidth 32 KB/s: closed over the output-buffer limit %s after the cap began; link freed then, resubscribed %s later",
		closedAt.Sub(start).Round(time.Millisecond), back.Sub(freed).Round(time.Millisecond))
}

// outputLimitClosures returns how many clients srv closed over their output-buffer
// limit, as its log says (Redis 7.0's INFO does not count them).
func outputLimitClosures(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	n, err := srv.LogCount("for overcoming of output buffer limits")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLinkPodPaused: a pod stopped with SIGSTOP for 10s, then continued, as a
// paused VM. Its subscribers of one kind wait for it; those of another give up on a
// stream silent for 3s (heartbeats come every second) and resume on the other pod.
// Its occupancy records lapse while it is stopped and come back after; nothing is
// lost.
func TestLinkPodPaused(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	a := linkPod(t, "paused", srv.Addr, nil)
	b := linkPod(t, "running", srv.Addr, nil)
	tr := newTrafficAt(t, []string{b.Public}, [][]string{{a.Public}, {a.Public, b.Public}, {b.Public}}, 3*time.Second, 10)
	tr.mustAck = true
	pubStop := make(chan struct{})
	tr.publish(100, pubStop)
	room := tr.rooms[0]
	// Each room has two members on a and one on b: b sees both pods' records.
	replaytest.Eventually(t, 10*time.Second, "both pods' occupancy records", func() bool { return fleetMembers(t, b, room) == 3 })

	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = a.Signal(syscall.SIGCONT) })
	// a's record lapses (it lives 3 occupancy intervals) and the subscribers that
	// give up move to b: b then counts its own members only, two per room.
	replaytest.Eventually(t, 9*time.Second, "the paused pod's record lapsed and its movable subscribers moved", func() bool {
		return fleetMembers(t, b, room) == 2
	})
	moved := time.Since(stopped)
	time.Sleep(time.Until(stopped.Add(10 * time.Second))) // the pause lasts 10s
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued := time.Now()
	// The waiting subscribers' streams carry on; a records its member again.
	replaytest.Eventually(t, 10*time.Second, "the continued pod's record", func() bool { return fleetMembers(t, b, room) == 3 })
	back := time.Since(continued)
	time.Sleep(time.Second)
	close(pubStop)
	tr.settle(30 * time.Second)
	t.Logf("SIGSTOP 10s: record lapsed and subscribers moved within %s; record back %s after SIGCONT",
		moved.Round(time.Millisecond), back.Round(time.Millisecond))
}

// fleetMembers returns the members of room over the fleet, as p answers
// GET /admin/rooms/{room}.
func fleetMembers(t *testing.T, p *gatewaytest.Process, room string) int {
	t.Helper()
	res, err := http.Get(p.Admin + "/admin/rooms/" + room)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		FleetMembers int `json:"fleet_members"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("GET /admin/rooms/%s: status %d: %v", room, res.StatusCode, err)
	}
	return body.FleetMembers
}
