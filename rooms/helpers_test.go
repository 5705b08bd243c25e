package rooms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// waitLimit bounds every wait in these tests; reaching it means the registry is stuck.
const waitLimit = 5 * time.Second

// quietLogger drops the registry's own warnings so test output stays readable.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newMemoryLog returns a MemoryLog closed at the end of the test.
func newMemoryLog(t testing.TB, cfg replay.MemoryConfig) *replay.MemoryLog {
	t.Helper()
	l, err := replay.NewMemoryLog(cfg)
	if err != nil {
		t.Fatalf("NewMemoryLog: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Errorf("log Close: %v", err)
		}
	})
	return l
}

// newRegistry returns a Registry over bus and log that logs nowhere unless cfg says,
// closed at the end of the test (registered after the log, so it closes first).
func newRegistry(t testing.TB, bus Bus, log Log, cfg Config) *Registry {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	g, err := New(bus, log, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			t.Errorf("registry Close: %v", err)
		}
	})
	return g
}

// setup is the common fixture: a MemoryLog, a fake bus over it and a registry.
func setup(t testing.TB, mcfg replay.MemoryConfig, cfg Config) (*replay.MemoryLog, *fakeBus, *Registry) {
	t.Helper()
	l := newMemoryLog(t, mcfg)
	b := newFakeBus(l)
	return l, b, newRegistry(t, b, l, cfg)
}

func join(t testing.TB, g *Registry, room string) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	m, err := g.Join(ctx, room)
	if err != nil {
		t.Fatalf("Join(%q): %v", room, err)
	}
	return m
}

// publish appends n events to room and returns the last one.
func publish(t testing.TB, l *replay.MemoryLog, room string, n int) replay.Event {
	t.Helper()
	var ev replay.Event
	for range n {
		var err error
		ev, err = l.Append(context.Background(), room, replay.Message{Body: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatalf("Append(%q): %v", room, err)
		}
	}
	return ev
}

// memoryEpochLen is the length of a MemoryLog's epochs (8 characters of [0-9a-z]).
const memoryEpochLen = 8

// sizedBody is a JSON string body that makes an event of room appended to a
// MemoryLog, which stores no type for a publish that names none, an item that weighs
// exactly weight bytes (Item.size). publishSized checks that it does.
func sizedBody(room string, weight int) json.RawMessage {
	n := weight - len(room) - 2*memoryEpochLen - itemFields // the body's length
	if n < 2 {
		panic(fmt.Sprintf("no body makes an item of %q weigh %d bytes", room, weight))
	}
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// publishSized appends n events to room whose items weigh exactly weight bytes each,
// and returns the last one.
func publishSized(t testing.TB, l *replay.MemoryLog, room string, n, weight int) replay.Event {
	t.Helper()
	var ev replay.Event
	for range n {
		var err error
		ev, err = l.Append(context.Background(), room, replay.Message{Body: sizedBody(room, weight)})
		if err != nil {
			t.Fatalf("Append(%q): %v", room, err)
		}
		if got := newItem(ev).size(); got != weight {
			t.Fatalf("event %s (epoch %q, type %q) weighs %d bytes, want %d", ev.ID(), ev.Epoch, ev.Type, got, weight)
		}
	}
	return ev
}

// next takes one item from m's queue, releasing its budget, or fails after waitLimit.
func next(t testing.TB, m *Member) *Item {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	it, ok := take(m, timer.C)
	if !ok {
		t.Fatalf("member of %q: no item within %s (reason %s)", m.Room(), waitLimit, m.Reason())
	}
	m.Release(it)
	return it
}

// take receives m's next item, or reports false once timeout fires. A closed queue
// was replaced by a longer one (see Member.Queue): Queue then gives that one.
func take(m *Member, timeout <-chan time.Time) (*Item, bool) {
	for {
		select {
		case it, ok := <-m.Queue():
			if ok {
				return it, true
			}
		case <-timeout:
			return nil, false
		}
	}
}

// poll is take without waiting.
func poll(m *Member) (*Item, bool) {
	for {
		select {
		case it, ok := <-m.Queue():
			if ok {
				return it, true
			}
		default:
			return nil, false
		}
	}
}

// isEvent reports whether it is the item of room's event at want: not a resync, and
// carrying that event (its position and id), not only its position.
func isEvent(it *Item, room string, want replay.Position) bool {
	return !it.Resync && it.Pos == want && it.Event.Room == room && it.Event.Position() == want &&
		it.Event.ID() == want.String()
}

// expectEvents takes the items for seq from..to of epoch from m's queue and checks
// each is the event at that position, in order, carrying its own event.
func expectEvents(t testing.TB, m *Member, epoch string, from, to uint64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		it := next(t, m)
		if want := (replay.Position{Epoch: epoch, Seq: seq}); !isEvent(it, m.Room(), want) {
			t.Fatalf("member of %q: got item {pos %s resync %v event %s of %q}, want event %s",
				m.Room(), it.Pos, it.Resync, it.Event.ID(), it.Event.Room, want)
		}
	}
}

// expectEmpty checks that nothing more is queued for m.
func expectEmpty(t testing.TB, m *Member) {
	t.Helper()
	if it, ok := poll(m); ok {
		t.Fatalf("member of %q: unexpected item {pos %s resync %v event %s}", m.Room(), it.Pos, it.Resync, it.Event.ID())
	}
}

// await receives from c or fails after waitLimit.
func await[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", waitLimit, what)
		var zero T
		return zero
	}
}

// quiet checks that nothing arrives on c for d: the bounded observation window of a
// negative assertion (something that must not happen), not a synchronisation point.
func quiet[T any](t testing.TB, c <-chan T, d time.Duration, what string) {
	t.Helper()
	if d <= 0 {
		select {
		case v := <-c:
			t.Fatalf("unexpected %s: %v", what, v)
		default:
		}
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-c:
		t.Fatalf("unexpected %s: %v", what, v)
	case <-timer.C:
	}
}

// roomRefs reports the references (members plus waiting joiners) on room, or -1 when
// the registry holds no such room.
func roomRefs(g *Registry, name string) int {
	s := g.shard(name)
	s.mu.Lock()
	r := s.rooms[name]
	s.mu.Unlock()
	if r == nil {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refs
}

// fakeBus is a Bus over a MemoryLog that counts and steers subscriptions: it can hold
// a Subscribe or an Unsubscribe until released, fail a Subscribe, and swallow or
// reorder rings so that the registry sees gaps.
type fakeBus struct {
	log *replay.MemoryLog

	mu        sync.Mutex
	subs      int
	unsubs    int
	live      map[string]int // subscriptions held per room
	overlap   bool           // a room was subscribed while already subscribed
	rings     map[string]func(replay.Event)
	subErr    error
	subGate   chan struct{}
	unsubGate chan struct{}
	intercept func(replay.Event) []replay.Event

	subEntered   chan string // a Subscribe call began
	subscribed   chan string // a Subscribe call succeeded
	unsubEntered chan string // an Unsubscribe call began
	unsubscribed chan string // an Unsubscribe call finished
}

var _ Bus = (*fakeBus)(nil)

func newFakeBus(l *replay.MemoryLog) *fakeBus {
	const buf = 1024
	return &fakeBus{
		log:          l,
		live:         make(map[string]int),
		rings:        make(map[string]func(replay.Event)),
		subEntered:   make(chan string, buf),
		subscribed:   make(chan string, buf),
		unsubEntered: make(chan string, buf),
		unsubscribed: make(chan string, buf),
	}
}

func signal(c chan string, room string) {
	select {
	case c <- room:
	default:
	}
}

// holdSubscribe makes Subscribe calls wait until the returned release is called.
func (b *fakeBus) holdSubscribe() (release func()) {
	gate := make(chan struct{})
	b.mu.Lock()
	b.subGate = gate
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.subGate = nil
			b.mu.Unlock()
			close(gate)
		})
	}
}

// holdUnsubscribe makes Unsubscribe calls wait until the returned release is called.
func (b *fakeBus) holdUnsubscribe() (release func()) {
	gate := make(chan struct{})
	b.mu.Lock()
	b.unsubGate = gate
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.unsubGate = nil
			b.mu.Unlock()
			close(gate)
		})
	}
}

// failSubscribe makes Subscribe calls fail with err (nil: succeed again).
func (b *fakeBus) failSubscribe(err error) {
	b.mu.Lock()
	b.subErr = err
	b.mu.Unlock()
}

// setIntercept routes every ring through f, which returns the events to ring now:
// none swallows the ring, several reorder or replay rings.
func (b *fakeBus) setIntercept(f func(replay.Event) []replay.Event) {
	b.mu.Lock()
	b.intercept = f
	b.mu.Unlock()
}

// ring rings room's subscriber directly, as the bus would (a zero Event means "events
// may have been missed").
func (b *fakeBus) ring(room string, ev replay.Event) {
	b.mu.Lock()
	fn := b.rings[room]
	b.mu.Unlock()
	if fn != nil {
		fn(ev)
	}
}

type busCounts struct {
	Subs, Unsubs, Live int
	Overlap            bool
}

func (b *fakeBus) counts() busCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := busCounts{Subs: b.subs, Unsubs: b.unsubs, Overlap: b.overlap}
	for _, n := range b.live {
		c.Live += n
	}
	return c
}

func (b *fakeBus) Subscribe(ctx context.Context, room string, ring func(replay.Event)) error {
	b.mu.Lock()
	b.subs++
	gate, err := b.subGate, b.subErr
	b.mu.Unlock()
	signal(b.subEntered, room)
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	b.mu.Lock()
	if b.live[room] > 0 {
		b.overlap = true
	}
	b.live[room]++
	b.rings[room] = ring
	b.mu.Unlock()
	if err := b.log.Subscribe(ctx, room, func(ev replay.Event) { b.deliver(room, ring, ev) }); err != nil {
		return err
	}
	signal(b.subscribed, room)
	return nil
}

func (b *fakeBus) deliver(room string, ring func(replay.Event), ev replay.Event) {
	b.mu.Lock()
	f := b.intercept
	b.mu.Unlock()
	if f == nil {
		ring(ev)
		return
	}
	for _, e := range f(ev) {
		ring(e)
	}
}

func (b *fakeBus) Unsubscribe(ctx context.Context, room string) error {
	b.mu.Lock()
	b.unsubs++
	gate := b.unsubGate
	b.mu.Unlock()
	signal(b.unsubEntered, room)
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := b.log.Unsubscribe(ctx, room)
	b.mu.Lock()
	b.live[room]--
	delete(b.rings, room)
	b.mu.Unlock()
	signal(b.unsubscribed, room)
	return err
}

// dropSeqs returns an intercept that swallows the rings of seqs lo..hi.
func dropSeqs(lo, hi uint64) func(replay.Event) []replay.Event {
	return func(ev replay.Event) []replay.Event {
		if ev.Seq >= lo && ev.Seq <= hi {
			return nil
		}
		return []replay.Event{ev}
	}
}

// failingHeadLog is a Log whose Head fails.
type failingHeadLog struct {
	*replay.MemoryLog
	err error
}

func (l failingHeadLog) Head(context.Context, string) (replay.Position, error) {
	return replay.Position{}, l.err
}

var errBoom = errors.New("boom")

func roomName(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
