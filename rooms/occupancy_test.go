package rooms

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestRoomInfo(t *testing.T) {
	l, b, g := setup(t, replay.MemoryConfig{}, Config{Linger: -1})
	if got := g.Room("nobody"); !reflect.DeepEqual(got, RoomInfo{Subscription: SubscriptionNone}) {
		t.Fatalf("a room nobody holds: %+v", got)
	}
	ms := []*Member{join(t, g, "a"), join(t, g, "a"), join(t, g, "a")}
	ev := publish(t, l, "a", 2)
	for range 2 {
		next(t, ms[0])
	}
	// ms[1] and ms[2] have both events waiting; ms[0] none.
	replaytest.Eventually(t, waitLimit, "events queued", func() bool { return len(ms[2].Queue()) == 2 && len(ms[1].Queue()) == 2 })
	got := g.Room("a")
	want := RoomInfo{Members: 3, Subscription: SubscriptionSubscribed, Head: ev.Position(),
		QueueDepth: QueueDepth{P50: 2, P90: 2, P99: 2, Max: 2, Sampled: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("room a: %+v, want %+v", got, want)
	}
	ms[1].Close(ReasonSlowConsumer) // closed members count as members until they leave, not in the depths
	if got := g.Room("a"); got.Members != 3 || got.QueueDepth != (QueueDepth{P50: 0, P90: 2, P99: 2, Max: 2, Sampled: 2}) {
		t.Fatalf("with one closed: %+v", got)
	}

	release := b.holdSubscribe()
	joined := make(chan *Member)
	go func() {
		m, _ := g.Join(context.Background(), "b")
		joined <- m
	}()
	replaytest.Eventually(t, waitLimit, "room b subscribing", func() bool { return g.Room("b").Subscription == SubscriptionSubscribing })
	release()
	mb := await(t, joined, "join of b")
	if got := g.Room("b"); got.Subscription != SubscriptionSubscribed || got.Members != 1 {
		t.Fatalf("room b after its join: %+v", got)
	}
	for _, m := range append(ms, mb) {
		g.Leave(m)
	}
	replaytest.Eventually(t, waitLimit, "rooms released", func() bool {
		return g.Room("a").Subscription == SubscriptionNone && g.Room("b").Subscription == SubscriptionNone
	})
	if got := g.Room("a"); !reflect.DeepEqual(got, RoomInfo{Subscription: SubscriptionNone}) {
		t.Fatalf("room a after every member left: %+v", got)
	}
}

func TestQueueDepthPercentiles(t *testing.T) {
	d := make([]int32, 0, 100)
	for i := 100; i >= 1; i-- {
		d = append(d, int32(i))
	}
	if got := depthOf(d); got != (QueueDepth{P50: 50, P90: 90, P99: 99, Max: 100, Sampled: 100}) {
		t.Fatalf("1..100: %+v", got)
	}
	if got := depthOf([]int32{7}); got != (QueueDepth{P50: 7, P90: 7, P99: 7, Max: 7, Sampled: 1}) {
		t.Fatalf("one: %+v", got)
	}
	if got := depthOf(nil); got != (QueueDepth{}) {
		t.Fatalf("none: %+v", got)
	}
}

func TestTopRooms(t *testing.T) {
	_, _, g := setup(t, replay.MemoryConfig{}, Config{Linger: time.Hour})
	for room, n := range map[string]int{"chat.b": 2, "chat.a": 2, "chat.c": 3, "chat.d": 1, "news": 5} {
		for range n {
			join(t, g, room)
		}
	}
	lonely := join(t, g, "chat.gone")
	g.Leave(lonely) // lingering, no members: not listed
	cases := []struct {
		prefix string
		limit  int
		want   []RoomMembers
		total  int
	}{
		{"", 50, []RoomMembers{{"news", 5}, {"chat.c", 3}, {"chat.a", 2}, {"chat.b", 2}, {"chat.d", 1}}, 5},
		{"", 2, []RoomMembers{{"news", 5}, {"chat.c", 3}}, 5},
		{"chat.", 3, []RoomMembers{{"chat.c", 3}, {"chat.a", 2}, {"chat.b", 2}}, 4},
		{"chat.", 1, []RoomMembers{{"chat.c", 3}}, 4},
		{"nope", 10, []RoomMembers{}, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%q/%d", c.prefix, c.limit), func(t *testing.T) {
			got, total := g.TopRooms(c.prefix, c.limit)
			if total != c.total || len(got) != len(c.want) || (len(got) > 0 && !reflect.DeepEqual(got, c.want)) {
				t.Fatalf("TopRooms: %v (total %d), want %v (total %d)", got, total, c.want, c.total)
			}
		})
	}
}

// fakeOccupancy is an OccupancyStore that keeps what it was told and reports each
// call.
type fakeOccupancy struct {
	mu    sync.Mutex
	state map[string]int // room → members, as last written
	calls chan []replay.RoomCount
	fail  int // calls still to fail
	pod   string
	ttl   time.Duration
}

func newFakeOccupancy() *fakeOccupancy {
	return &fakeOccupancy{state: make(map[string]int), calls: make(chan []replay.RoomCount, 1000)}
}

func (f *fakeOccupancy) SetOccupancy(_ context.Context, pod string, ttl time.Duration, counts []replay.RoomCount) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pod, f.ttl = pod, ttl
	if f.fail > 0 {
		f.fail--
		return errors.New("store down")
	}
	for _, c := range counts {
		if c.Members == 0 {
			delete(f.state, c.Room)
		} else {
			f.state[c.Room] = c.Members
		}
	}
	f.calls <- append([]replay.RoomCount(nil), counts...)
	return nil
}

func (f *fakeOccupancy) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.state)
}

func newReporter(t *testing.T, g *Registry, store OccupancyStore, cfg ReporterConfig) *Reporter {
	t.Helper()
	if cfg.Pod == "" {
		cfg.Pod = "pod-1"
	}
	cfg.Logger = quietLogger()
	rp, err := NewReporter(g, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rp.Close(context.Background()) })
	return rp
}

// TestReporterForgetsEmptiedRoomAtOnce: with passes an hour apart, a room whose last
// member leaves is forgotten at once, the others stay; Close forgets the rest.
func TestReporterForgetsEmptiedRoomAtOnce(t *testing.T) {
	_, _, g := setup(t, replay.MemoryConfig{}, Config{Linger: time.Hour})
	a1, a2, b := join(t, g, "a"), join(t, g, "a"), join(t, g, "b")
	store := newFakeOccupancy()
	rp := newReporter(t, g, store, ReporterConfig{Interval: time.Hour})
	first := await(t, store.calls, "first pass")
	if got := store.snapshot(); !reflect.DeepEqual(got, map[string]int{"a": 2, "b": 1}) || len(first) != 2 {
		t.Fatalf("after the first pass: %v (call %v)", got, first)
	}
	if store.pod != "pod-1" || store.ttl != 3*time.Hour || rp.TTL() != 3*time.Hour {
		t.Fatalf("pod %q, ttl %s; want pod-1 and 3 intervals", store.pod, store.ttl)
	}
	g.Leave(a1) // not the last: nothing until the next pass
	g.Leave(a2)
	if got := await(t, store.calls, "forget a"); !reflect.DeepEqual(got, []replay.RoomCount{{Room: "a"}}) {
		t.Fatalf("on a's last leave: %v, want a forgotten", got)
	}
	if err := rp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := await(t, store.calls, "close"); !reflect.DeepEqual(got, []replay.RoomCount{{Room: "b"}}) {
		t.Fatalf("on close: %v, want b forgotten", got)
	}
	if got := store.snapshot(); len(got) != 0 {
		t.Fatalf("after close: %v", got)
	}
	g.Leave(b)
}

// TestReporterFollowsCounts: passes write changed counts, refresh unchanged ones,
// and retry what a failed write left.
func TestReporterFollowsCounts(t *testing.T) {
	_, _, g := setup(t, replay.MemoryConfig{}, Config{Linger: time.Hour})
	store := newFakeOccupancy()
	store.fail = 1
	newReporter(t, g, store, ReporterConfig{Interval: 10 * time.Millisecond})
	join(t, g, "a")
	join(t, g, "b")
	replaytest.Eventually(t, waitLimit, "a and b recorded", func() bool {
		return reflect.DeepEqual(store.snapshot(), map[string]int{"a": 1, "b": 1})
	})
	join(t, g, "a")
	replaytest.Eventually(t, waitLimit, "a's second member recorded", func() bool {
		return reflect.DeepEqual(store.snapshot(), map[string]int{"a": 2, "b": 1})
	})
	// Unchanged counts are written again before their records lapse.
	refreshed := 0
	for refreshed < 3 {
		for _, c := range await(t, store.calls, "a refresh") {
			if c.Room == "b" && c.Members == 1 {
				refreshed++
			}
		}
	}
}

// TestReporterBoundsAPass: one pass writes at most MaxWrites records; the rest wait.
func TestReporterBoundsAPass(t *testing.T) {
	_, _, g := setup(t, replay.MemoryConfig{}, Config{Linger: time.Hour})
	for i := range 12 {
		join(t, g, roomName("r", i))
	}
	store := newFakeOccupancy()
	rp := newReporter(t, g, store, ReporterConfig{Interval: time.Hour, MaxWrites: 5})
	if got := await(t, store.calls, "first pass"); len(got) != 5 {
		t.Fatalf("first pass wrote %d records, want 5", len(got))
	}
	if err := rp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The first pass wrote one call; Close forgets exactly what it wrote.
	if got := await(t, store.calls, "close"); len(got) != 5 {
		t.Fatalf("close forgot %d records, want 5", len(got))
	}
}

func TestReporterValidates(t *testing.T) {
	_, _, g := setup(t, replay.MemoryConfig{}, Config{})
	store := newFakeOccupancy()
	for _, cfg := range []ReporterConfig{{Pod: ""}, {Pod: "has space"}, {Pod: "p", Interval: -time.Second}, {Pod: "p", MaxWrites: -1}} {
		if _, err := NewReporter(g, store, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	newReporter(t, g, store, ReporterConfig{Interval: time.Hour})
	if _, err := NewReporter(g, store, ReporterConfig{Pod: "p2"}); err == nil {
		t.Error("a second reporter on one registry: no error")
	}
}
