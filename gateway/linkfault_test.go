package gateway_test

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"sync"
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
	// never would here (the proxy's kernel answers it), and rueidis's defaults
	// for a 30s keepalive meant 5 minutes.
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
	replaytest.Eventually(t, 30*time.Second, "the faulty pod resubscribed", func() bool {
		return scrape(t, faulty.Admin).Value("roomcast_redis_resubscribes_total") > resubs
	})
	back := time.Now()
	time.Sleep(time.Second) // traffic after the repair
	close(pubStop)
	tr.settle(30 * time.Second)
	// The command connection works again too.
	publishOne(t, faulty, tr.rooms[0])
	t.Logf("blackhole: health down after %s, subscription lost after %s; lifted at %s, resubscribed %s later",
		sinceOrNone(down, start), lost.Sub(start).Round(time.Millisecond), lifted.Sub(start).Round(time.Millisecond),
		back.Sub(lifted).Round(time.Millisecond))
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
