package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// Fleet tests: several pods, each with its own RedisLog, registry and router, on one
// real Redis Cluster.

type addrser interface{ Addrs() []string }

// newFleetPod builds one pod on the cluster.
func newFleetPod(t testing.TB, c addrser, rc replay.RedisConfig, pc podConfig) *pod {
	t.Helper()
	rc.Addrs = c.Addrs()
	if rc.History == 0 {
		rc.History = 1000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := replay.NewRedisLog(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	return newPodOn(t, l, pc)
}

func TestFleetEventsCrossPodsInOrderAndResumeElsewhere(t *testing.T) {
	c := redistest.SharedCluster(t)
	a := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	b := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	room := redistest.Prefix(t)

	onB := b.subscribe(t, room, "")
	onB.nextAny()
	onA := a.subscribe(t, room, "")
	onA.nextAny()
	var ids []string
	for i := 1; i <= 100; i++ {
		ids = append(ids, a.publish(t, room, `{"i":`+strconv.Itoa(i)+`}`))
	}
	for i, id := range ids {
		if f := onB.next(); f.id != id {
			t.Fatalf("pod B event %d: %q, want %q", i, f.id, id)
		}
	}
	// A client read up to seq 40 on pod A, lost its connection, and resumes on B.
	for i := 0; i < 40; i++ {
		onA.next()
	}
	onA.close()
	resumed := b.subscribe(t, room, "", "Last-Event-ID", ids[39])
	live := a.publish(t, room, `{"i":101}`)
	for _, id := range append(ids[40:], live) {
		if f := resumed.next(); f.id != id {
			t.Fatalf("resumed on B: %q, want %q", f.id, id)
		}
	}
}

// shardSubscribers asks the room's shard how many connections hold its channel.
func shardSubscribers(t *testing.T, c *redistest.Cluster, room string) int {
	t.Helper()
	out := c.NodeForKey(t, "room:{"+room+"}").MustDo(t, "PUBSUB", "SHARDNUMSUB", "room:{"+room+"}")
	lines := strings.Fields(out)
	n, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil {
		t.Fatalf("SHARDNUMSUB answered %q", out)
	}
	return n
}

func TestFleetOneSubscriptionPerRoomPerPod(t *testing.T) {
	c := redistest.SharedCluster(t)
	a := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	b := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	room := redistest.Prefix(t)

	var streams []*stream
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < 8; i++ {
		p := a
		if i >= 5 {
			p = b
		}
		wg.Go(func() { // concurrent joins share one pending subscribe
			s := p.subscribe(t, room, "")
			s.nextAny()
			mu.Lock()
			streams = append(streams, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := shardSubscribers(t, c, room); n != 2 {
		t.Fatalf("SHARDNUMSUB = %d with members on 2 pods, want 2", n)
	}
	if st := a.rooms.Stats(); st.Subscriptions != 1 || st.Members != 5 {
		t.Fatalf("pod A: %+v", st)
	}
	for _, s := range streams {
		s.close()
	}
	replaytest.Eventually(t, 10*time.Second, "SHARDNUMSUB back to 0", func() bool { return shardSubscribers(t, c, room) == 0 })
}

func TestFleetIdempotencyAcrossPods(t *testing.T) {
	c := redistest.SharedCluster(t)
	a := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	b := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	room := redistest.Prefix(t)
	s := b.subscribe(t, room, "")
	s.nextAny()
	post := func(p *pod) string {
		res := do(t, http.MethodPost, p.public.URL+"/rooms/"+room+"/events", `{"order":9}`,
			"Content-Type", "application/json", "Idempotency-Key", "order-9")
		if res.status != http.StatusCreated {
			t.Fatalf("%d %s", res.status, res.body)
		}
		return res.body
	}
	if first, second := post(a), post(b); first != second {
		t.Fatalf("pod A answered %s, pod B %s", first, second)
	}
	next := a.publish(t, room, `{"after":true}`)
	if f := s.next(); f.seq(t) != 1 {
		t.Fatalf("%+v", f)
	}
	if f := s.next(); f.id != next || f.seq(t) != 2 {
		t.Fatalf("the retry through pod B was published again: %+v", f)
	}
}

func TestFleetBatchIsPipelined(t *testing.T) {
	c := redistest.SharedCluster(t)
	a := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	p := redistest.Prefix(t)
	var items []string
	for i := 0; i < 30; i++ {
		items = append(items, `{"room":"`+p+`.`+strconv.Itoa(i%3)+`","body":`+strconv.Itoa(i)+`}`)
	}
	res := do(t, http.MethodPost, a.public.URL+"/events", "["+strings.Join(items, ",")+"]", "Content-Type", "application/json")
	if res.status != http.StatusOK || strings.Count(res.body, `"status":201`) != 30 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	for i := 0; i < 3; i++ {
		s := a.subscribe(t, p+"."+strconv.Itoa(i), "", "Last-Event-ID", "0")
		for want := uint64(1); want <= 10; want++ {
			if got := s.next().seq(t); got != want {
				t.Fatalf("room %d: seq %d, want %d", i, got, want)
			}
		}
	}
	_ = gateway.Config{}
}
