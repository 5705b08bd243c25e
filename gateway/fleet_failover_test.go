package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// traffic is the load of a failure test: resuming subscribers on several pods and
// publishers that retry with an idempotency key until Redis accepts (so a publish
// never fails for good), recording every acknowledged seq.
type traffic struct {
	t     *testing.T
	pods  []*pod
	rooms []string

	mu    sync.Mutex
	acked map[string]map[uint64]bool // room → acknowledged seqs
	epoch map[string]string

	// mustAck: a publish begun before the publishers stop keeps retrying until it is
	// acknowledged (for at most 30s), and one that never is fails the test.
	mustAck bool
	failed  []string
	resyncs int

	subs  []*trafficSub
	stop  chan struct{}
	wg    sync.WaitGroup // subscribers
	pubWG sync.WaitGroup // publishers
}

// trafficSub is one client: it reads its stream, checks that seqs are dense and
// single, and resumes by id on any end.
type trafficSub struct {
	room string
	pod  *pod

	mu       sync.Mutex
	track    gatewaytest.Tracker
	got      map[uint64]int // seq → times delivered (within the current epoch)
	covered  [][2]uint64    // (from, to] ranges a resync declared lost
	last     replay.Position
	problems []string
	reconns  int
	trace    []string // every frame and reconnect, for the failure message
}

func newTraffic(t *testing.T, pods []*pod, rooms int) *traffic {
	tr := &traffic{t: t, pods: pods, acked: map[string]map[uint64]bool{}, epoch: map[string]string{}, stop: make(chan struct{})}
	p := redistest.Prefix(t)
	for i := 0; i < rooms; i++ {
		r := p + "." + strconv.Itoa(i)
		tr.rooms = append(tr.rooms, r)
		tr.acked[r] = map[uint64]bool{}
		for _, pd := range pods {
			s := &trafficSub{room: r, pod: pd, got: map[uint64]int{}}
			s.track.ExpectFirst(1)
			s.track.ResyncIsHead()
			tr.subs = append(tr.subs, s)
		}
	}
	for _, s := range tr.subs {
		tr.wg.Go(func() { s.run(tr.stop) })
	}
	// Publishing starts once every subscriber is in: each must then see seq 1 on.
	replaytest.Eventually(t, 10*time.Second, "every subscriber joined", func() bool {
		n := 0
		for _, pd := range pods {
			n += pd.rooms.Len()
		}
		return n == len(tr.subs)
	})
	return tr
}

func (s *trafficSub) problem(format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *trafficSub) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		s.once(stop)
		s.mu.Lock()
		s.reconns++
		s.trace = append(s.trace, "reconnect")
		s.mu.Unlock()
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
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.pod.public.URL+"/rooms/"+s.room+"/events", nil)
	s.mu.Lock()
	if s.last != (replay.Position{}) {
		req.Header.Set("Last-Event-ID", s.last.String())
	}
	s.mu.Unlock()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
	for {
		ev, err := dec.Next()
		if err != nil {
			return
		}
		id := ""
		if ev.IDSet {
			id = string(ev.ID)
		}
		s.frame(id, string(ev.Type))
	}
}

func (s *trafficSub) frame(id, event string) {
	pos, err := replay.ParsePosition(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.problem("bad id %q", id)
		return
	}
	s.trace = append(s.trace, event+" "+id)
	if event == gatewaytest.AnchorType {
		return // every subscriber joined before the first publish: its anchor is 0
	}
	if event == "resync" {
		if pos.Epoch == s.last.Epoch && pos.Seq > s.last.Seq {
			s.covered = append(s.covered, [2]uint64{s.last.Seq, pos.Seq})
		} else if pos.Epoch != s.last.Epoch && s.last.Epoch != "" {
			s.problem("resync to another epoch %s (was %s)", pos, s.last)
		}
		s.track.Resync([]byte(pos.Epoch), pos.Seq)
		s.last = pos
		return
	}
	// From seq 1 on: every subscriber joined before the first publish.
	if v := s.track.Observe([]byte(pos.Epoch), pos.Seq); v != gatewaytest.InOrder {
		s.problem("event %s after %s: %s", pos, s.last, v)
	}
	s.got[pos.Seq]++
	s.last = pos
}

// publish runs publishers at rate events/s in total until stop.
func (tr *traffic) publish(rate int, stop <-chan struct{}) {
	const workers = 8
	tick := time.Second * workers / time.Duration(rate)
	for w := 0; w < workers; w++ {
		tr.pubWG.Go(func() {
			t := time.NewTicker(tick)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				room := tr.rooms[(i*workers+w)%len(tr.rooms)]
				pd := tr.pods[(i+w)%len(tr.pods)]
				tr.publishOne(pd, room, fmt.Sprintf("w%d-%d", w, i), stop)
			}
		})
	}
}

// publishOne retries a publish with one idempotency key until it is acknowledged.
func (tr *traffic) publishOne(pd *pod, room, key string, stop <-chan struct{}) {
	giveUp := time.Now().Add(30 * time.Second)
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, pd.public.URL+"/rooms/"+room+"/events", strings.NewReader(`{"k":"`+key+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			var out struct {
				Epoch string
				Seq   uint64
			}
			ok := res.StatusCode == http.StatusCreated && json.NewDecoder(res.Body).Decode(&out) == nil
			res.Body.Close()
			if ok {
				tr.mu.Lock()
				tr.acked[room][out.Seq] = true
				tr.epoch[room] = out.Epoch
				tr.mu.Unlock()
				return
			}
		}
		if tr.mustAck {
			if time.Now().After(giveUp) {
				tr.mu.Lock()
				tr.failed = append(tr.failed, room+" "+key)
				tr.mu.Unlock()
				return
			}
			stop = nil // keep retrying: this publish must land
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(min(attempt+1, 10)) * 50 * time.Millisecond):
		}
	}
}

// settle waits for the publishers to return, then until every subscriber reached its
// room's newest acknowledged seq, then stops the subscribers and checks every one.
func (tr *traffic) settle(within time.Duration) {
	t := tr.t
	t.Helper()
	tr.pubWG.Wait()
	for _, f := range tr.failed {
		t.Errorf("publish %s failed for good", f)
	}
	deadline := time.Now().Add(within)
	for _, s := range tr.subs {
		tr.mu.Lock()
		var top uint64
		for seq := range tr.acked[s.room] {
			top = max(top, seq)
		}
		tr.mu.Unlock()
		for {
			s.mu.Lock()
			reached := s.last.Seq >= top
			s.mu.Unlock()
			if reached {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s on %s stopped at %s, want seq %d", s.room, s.pod.public.URL, s.last, top)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(tr.stop)
	tr.wg.Wait()

	totalAcked, resyncs := 0, 0
	for _, s := range tr.subs {
		for _, p := range s.problems {
			t.Errorf("%s on %s: %s", s.room, s.pod.public.URL, p)
		}
		resyncs += len(s.covered)
		for seq := range tr.acked[s.room] {
			if s.got[seq] == 1 {
				continue
			}
			explained := false
			for _, c := range s.covered {
				if seq > c[0] && seq <= c[1] {
					explained = true
				}
			}
			if !explained {
				t.Errorf("%s on %s: acknowledged seq %d delivered %d times and no resync covers it; saw %v", s.room, s.pod.public.URL, seq, s.got[seq], s.trace)
			}
		}
	}
	for _, r := range tr.rooms {
		totalAcked += len(tr.acked[r])
	}
	t.Logf("%d acknowledged events over %d rooms, %d subscribers, %d resyncs", totalAcked, len(tr.rooms), len(tr.subs), resyncs)
	tr.resyncs = resyncs
	if totalAcked < 100 {
		t.Fatalf("only %d events acknowledged: the traffic did not run", totalAcked)
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
