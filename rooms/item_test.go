package rooms

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// countingFraming is a Framing that encodes an event as "<name> <id>" and counts its
// encodings. Held (hold), each encoding waits until released.
type countingFraming struct {
	Framing *Framing
	name    string
	calls   atomic.Int64

	entered chan struct{}                 // an encoding began (when held)
	release atomic.Pointer[chan struct{}] // closed to let held encodings finish
}

func newCountingFraming(slot int, name string) *countingFraming {
	f := &countingFraming{name: name, entered: make(chan struct{}, 1024)}
	f.Framing = &Framing{Slot: slot, Encode: func(ev replay.Event) []byte {
		f.calls.Add(1)
		if release := f.release.Load(); release != nil {
			select {
			case f.entered <- struct{}{}:
			default: // nobody counts this many
			}
			<-*release
		}
		return []byte(name + " " + ev.ID())
	}}
	return f
}

// hold makes encodings wait until the returned release is called, at the end of the
// test at the latest.
func (f *countingFraming) hold(t testing.TB) (release func()) {
	c := make(chan struct{})
	f.release.Store(&c)
	var once sync.Once
	release = func() { once.Do(func() { close(c) }) }
	t.Cleanup(release)
	return release
}

// want is the encoding of ev in f.
func (f *countingFraming) want(ev replay.Event) string { return f.name + " " + ev.ID() }

// expectShared checks that a and b, items of one event, give the same encoding in f:
// the event's, in the very same bytes (one backing array), not an equal copy.
func (f *countingFraming) expectShared(t testing.TB, a, b *Item) {
	t.Helper()
	x, y := a.Encoded(f.Framing), b.Encoded(f.Framing)
	if string(x) != f.want(a.Event) || string(y) != f.want(b.Event) {
		t.Fatalf("%s encodings %q and %q, want %q", f.name, x, y, f.want(a.Event))
	}
	if &x[0] != &y[0] || len(x) != len(y) {
		t.Fatalf("%s encodings of %s are two copies, want the one made first", f.name, a.Event.ID())
	}
}

// TestEncodedOncePerFraming: fan-out gives every member of a room the one item of an
// event, and the item's encoding in a framing is made once, by its first reader, and
// shared by every other, members' and concurrent callers' alike; two framings keep
// their encodings apart.
func TestEncodedOncePerFraming(t *testing.T) {
	const members = 64
	l, _, g := setup(t, replay.MemoryConfig{}, Config{})
	ms := make([]*Member, members)
	for i := range ms {
		ms[i] = join(t, g, "lobby")
	}
	sse, ws := newCountingFraming(0, "sse"), newCountingFraming(1, "ws")

	// Members' readers take their turns: the first encodes, the others share it.
	ev := publish(t, l, "lobby", 1)
	first := next(t, ms[0])
	if !isEvent(first, "lobby", ev.Position()) {
		t.Fatalf("got item {pos %s resync %v event %s}, want event %s", first.Pos, first.Resync, first.Event.ID(), ev.ID())
	}
	kept := first.Encoded(sse.Framing)
	for i, m := range ms[1:] {
		it := next(t, m)
		if it != first {
			t.Fatalf("member %d got an item of its own for %s, want the one every member shares", i+1, ev.ID())
		}
		sse.expectShared(t, first, it)
	}
	if n := sse.calls.Load(); n != 1 {
		t.Fatalf("one event read by %d members encoded %d times, want once", members, n)
	}
	// Another framing keeps its own encoding, and leaves the first one's be.
	if got := string(first.Encoded(ws.Framing)); got != ws.want(ev) {
		t.Fatalf("ws encoding %q, want %q", got, ws.want(ev))
	}
	ws.expectShared(t, first, first)
	if b := first.Encoded(sse.Framing); &b[0] != &kept[0] || string(b) != sse.want(ev) {
		t.Fatalf("sse encoding %q after the ws one, want the one kept before, %q", b, kept)
	}
	if s, w := sse.calls.Load(), ws.calls.Load(); s != 1 || w != 1 {
		t.Fatalf("sse encoded %d times, ws %d, want once each", s, w)
	}

	// Concurrent first calls, in both framings at once: each caller gets the one
	// encoding kept, however many of them encoded. The sse encodings are held until
	// a second one has begun, so that two first calls do run at once where Encoded
	// lets them (it may as well make the others wait: then the hold ends after a
	// bounded while).
	ev = publish(t, l, "lobby", 1)
	items := make([]*Item, members)
	for i, m := range ms {
		if items[i] = next(t, m); items[i] != items[0] || !isEvent(items[i], "lobby", ev.Position()) {
			t.Fatalf("member %d: item {pos %s event %s}, want the shared item of %s", i, items[i].Pos, items[i].Event.ID(), ev.ID())
		}
	}
	sse.calls.Store(0)
	ws.calls.Store(0)
	gotSSE, gotWS := make([][]byte, members), make([][]byte, members)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() {
			<-start
			if i%2 == 0 {
				gotSSE[i], gotWS[i] = it.Encoded(sse.Framing), it.Encoded(ws.Framing)
			} else {
				gotWS[i], gotSSE[i] = it.Encoded(ws.Framing), it.Encoded(sse.Framing)
			}
		})
	}
	release := sse.hold(t)
	close(start)
	await(t, sse.entered, "an sse encoding")
	second := time.NewTimer(waitLimit / 50)
	select {
	case <-sse.entered:
	case <-second.C:
	}
	second.Stop()
	release()
	wg.Wait()
	for _, c := range []struct {
		f   *countingFraming
		got [][]byte
	}{{sse, gotSSE}, {ws, gotWS}} {
		n := c.f.calls.Load()
		if n < 1 || n > members {
			t.Fatalf("%d concurrent readers encoded %s %d times, want 1 to %d", members, c.f.name, n, members)
		}
		kept := items[0].Encoded(c.f.Framing)
		for i, b := range c.got {
			if string(b) != c.f.want(ev) || &b[0] != &kept[0] {
				t.Fatalf("reader %d got %s encoding %q, want the one kept, %q", i, c.f.name, b, kept)
			}
		}
		if m := c.f.calls.Load(); m != n {
			t.Fatalf("%s encoded again (%d times, then %d) once an encoding was kept", c.f.name, n, m)
		}
	}
}
