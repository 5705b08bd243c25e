package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// traffic is the load of a failure test: resuming subscribers on several pods and
// publishers that retry with an idempotency key until Redis accepts, recording every
// acknowledged seq (gatewaytest.Ledger); each subscriber checks what it receives
// (gatewaytest.Audit).
type traffic struct {
	t       *testing.T
	targets []string // where publishers publish: pods' base URLs
	rooms   []string
	ledger  *gatewaytest.Ledger

	// mustAck: a publish begun before the publishers stop keeps retrying until it is
	// acknowledged (for at most 30s), and one that never is fails the test.
	mustAck bool
	resyncs int

	subs []*trafficSub
	stop chan struct{}
	wg   sync.WaitGroup // subscribers
}

// trafficSub is one client: it reads its stream into its audit and resumes by id on
// any end, at bases[0], or, when its stream stays silent for idle (heartbeats
// included; 0: never), at the next of its bases.
type trafficSub struct {
	bases  []string
	idle   time.Duration
	audit  *gatewaytest.Audit
	anchor atomic.Pointer[string] // the anchor's id: where to resume before any event
	at     atomic.Int32           // index into bases
}

func newTraffic(t *testing.T, pods []*pod, rooms int) *traffic {
	targets := make([]string, len(pods))
	for i, pd := range pods {
		targets[i] = pd.public.URL
	}
	subs := make([][]string, len(pods))
	for i := range targets {
		subs[i] = []string{targets[i]}
	}
	return newTrafficAt(t, targets, subs, 0, rooms)
}

// newTrafficAt starts, for each room, a subscriber per entry of subs (the bases it
// connects to, in turn, each time its stream stays silent for idle); publishers
// (traffic.publish) go to targets. It returns once every subscriber has its anchor.
func newTrafficAt(t *testing.T, targets []string, subs [][]string, idle time.Duration, rooms int) *traffic {
	tr := &traffic{t: t, targets: targets, ledger: gatewaytest.NewLedger(), stop: make(chan struct{})}
	p := redistest.Prefix(t)
	for i := 0; i < rooms; i++ {
		r := p + "." + strconv.Itoa(i)
		tr.rooms = append(tr.rooms, r)
		for _, bases := range subs {
			// From seq 1 on: every subscriber joins before the first publish. A resync
			// within the epoch declares what it skips lost.
			tr.subs = append(tr.subs, &trafficSub{bases: bases, idle: idle, audit: gatewaytest.NewAudit(r, 1, true)})
		}
	}
	for _, s := range tr.subs {
		tr.wg.Go(func() { s.run(tr.stop) })
	}
	// Publishing starts once every subscriber is in (its anchor, sent once it joined,
	// came): each must then see seq 1 on.
	replaytest.Eventually(t, 20*time.Second, "every subscriber joined", func() bool {
		for _, s := range tr.subs {
			if s.anchor.Load() == nil {
				return false
			}
		}
		return true
	})
	return tr
}

func (s *trafficSub) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		s.once(stop)
		s.audit.Note("reconnect")
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// once reads one connection until it ends or stop.
func (s *trafficSub) once(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.bases[s.at.Load()]+"/rooms/"+s.audit.Room()+"/events", nil)
	if last := s.audit.Last(); last != (replay.Position{}) {
		req.Header.Set("Last-Event-ID", last.String())
	} else if a := s.anchor.Load(); a != nil {
		req.Header.Set("Last-Event-ID", *a)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	var body io.Reader = res.Body
	if s.idle > 0 {
		// A stream that stays silent past idle (its pod stopped, its link died) is
		// given up: the next connection goes to the next base.
		idle := time.AfterFunc(s.idle, func() {
			s.at.Store((s.at.Load() + 1) % int32(len(s.bases)))
			cancel()
		})
		defer idle.Stop()
		body = idleReader{res.Body, idle, s.idle}
	}
	dec := gatewaytest.NewDecoder(bufio.NewReader(body), nil)
	for {
		ev, err := dec.Next()
		if err != nil {
			return
		}
		if ev.IsAnchor() {
			id := string(ev.ID)
			s.anchor.CompareAndSwap(nil, &id)
			continue
		}
		id := ""
		if ev.IDSet {
			id = string(ev.ID)
		}
		s.audit.Frame(id, string(ev.Type))
	}
}

// idleReader resets its timer at every read that returns bytes.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	return n, err
}

// publish runs publishers at rate events/s in total until stop, each publish to the
// pods in turn.
func (tr *traffic) publish(rate int, stop <-chan struct{}) {
	tr.ledger.Publish(gatewaytest.Publishers{Targets: tr.targets, Rooms: tr.rooms, Rate: rate, Key: "pub", MustAck: tr.mustAck}, stop)
}

// settle waits for the publishers to return, then until every subscriber reached its
// room's newest acknowledged seq, then stops the subscribers and checks every one.
func (tr *traffic) settle(within time.Duration) {
	t := tr.t
	t.Helper()
	audits := make([]*gatewaytest.Audit, len(tr.subs))
	for i, s := range tr.subs {
		audits[i] = s.audit
	}
	tr.ledger.Settle(t, audits, within)
	close(tr.stop)
	tr.wg.Wait()
	rep := tr.ledger.Check(t, audits)
	t.Logf("%d rooms, %d subscribers: %s", len(tr.rooms), len(tr.subs), rep)
	tr.resyncs = rep.Resyncs
	if rep.Acked < 100 {
		t.Fatalf("only %d events acknowledged: the traffic did not run", rep.Acked)
	}
}

func fleetForFailure(t *testing.T, rc replay.RedisConfig) (*redistest.Cluster, []*pod) {
	c := redistest.StartCluster(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second})
	pc := podConfig{gw: gateway.Config{Heartbeat: 500 * time.Millisecond, RetryMin: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond}}
	return c, []*pod{newFleetPod(t, c, rc, pc), newFleetPod(t, c, rc, pc)}
}

// TestFleetManualFailoverUnderTraffic: 200 events/s to 50 rooms with a subscriber of
// every room on each of two pods; CLUSTER FAILOVER moves one shard to its replica.
func TestFleetManualFailoverUnderTraffic(t *testing.T) {
	c, pods := fleetForFailure(t, replay.RedisConfig{})
	tr := newTraffic(t, pods, 50)
	pubStop := make(chan struct{})
	tr.publish(200, pubStop)

	time.Sleep(2 * time.Second) // traffic before the failure: a duration, not a sync point
	owner := c.NodeForKey(t, "room:{"+tr.rooms[0]+"}")
	c.Failover(t, c.ReplicasOf(t, owner)[0])
	time.Sleep(3 * time.Second) // traffic after it
	close(pubStop)
	tr.settle(30 * time.Second)
}

// TestFleetPrimaryKilledUnderTraffic: the same traffic, and kill -9 of a primary.
// Publishes wait for a replica (--publish-wait-replicas 1), so whatever was
// acknowledged survives the failover; the shard has no replica left afterwards, so
// its rooms only take publishes again once their retries see a new primary with one
// (never here): the test checks what was acknowledged.
func TestFleetPrimaryKilledUnderTraffic(t *testing.T) {
	c, pods := fleetForFailure(t, replay.RedisConfig{WaitReplicas: 1})
	tr := newTraffic(t, pods, 50)
	pubStop := make(chan struct{})
	tr.publish(200, pubStop)

	time.Sleep(2 * time.Second)
	owner := c.NodeForKey(t, "room:{"+tr.rooms[0]+"}")
	c.Kill(t, owner)
	time.Sleep(3 * time.Second)
	close(pubStop)
	tr.settle(30 * time.Second)
}

// TestFleetSlotMigrationUnderTraffic moves a busy room's slot to another primary
// while it is published to, with its keys split between the two nodes for a while
// (TRYAGAIN). No publish may fail for good and no subscriber may miss an event.
func TestFleetSlotMigrationUnderTraffic(t *testing.T) {
	c, pods := fleetForFailure(t, replay.RedisConfig{})
	tr := newTraffic(t, pods, 10)
	tr.mustAck = true
	pubStop := make(chan struct{})
	tr.publish(200, pubStop)

	room := tr.rooms[0]
	slot := redistest.Slot("room:{" + room + "}")
	from := c.NodeForKey(t, "room:{"+room+"}")
	var to *redistest.Node
	for _, p := range c.Primaries(t) {
		if p != from {
			to = p
		}
	}
	time.Sleep(time.Second) // traffic before the move
	c.BeginMigration(t, slot, from, to)
	time.Sleep(500 * time.Millisecond) // slot MIGRATING, keys still on the source
	tryagain := func() int {
		n := 0
		for _, node := range []*redistest.Node{from, to} {
			k, err := node.ErrorCount("TRYAGAIN")
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		return n
	}
	before := tryagain()
	c.MigrateKeys(t, slot, from, to, "room:{"+room+"}:log")
	time.Sleep(500 * time.Millisecond) // keys split: publishes answer TRYAGAIN
	c.MigrateKeys(t, slot, from, to)
	if tryagain() == before {
		t.Error("no publish met TRYAGAIN while the room's keys were split")
	}
	c.FinishMigration(t, slot, from, to)
	time.Sleep(time.Second) // traffic after the move
	close(pubStop)
	tr.settle(30 * time.Second)
	if tr.resyncs != 0 {
		t.Fatalf("%d resyncs: a slot move must not lose history", tr.resyncs)
	}
	if got := c.NodeForKey(t, "room:{"+room+"}"); got != to {
		t.Fatalf("the slot is on %s, want %s", got.Addr, to.Addr)
	}
}
