package rooms

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// expectSameAsLog checks that Since answers every position of positions exactly as a
// read of the log does: the same events, each with its item, the same resync point,
// resync and fork flags, and head. The room must be caught up (nothing in flight).
func expectSameAsLog(t *testing.T, g *Registry, l replay.Reader, room string, positions []replay.Position) {
	t.Helper()
	ctx := context.Background()
	for _, p := range positions {
		got, err := g.Since(ctx, room, p, 1000)
		want, werr := replay.ReadOn(ctx, l, room, p, 1000)
		if (err != nil) != (werr != nil) {
			t.Fatalf("since %s: error %v, the log's %v", p, err, werr)
		}
		if got.From != want.From || got.Head != want.Head || got.Resync != want.Resync || got.Fork != want.Fork ||
			len(got.Events) != len(want.Events) || len(got.Items) != len(got.Events) {
			t.Fatalf("since %s: got {from %s head %s resync %v fork %v, %d events, %d items}, the log {from %s head %s resync %v fork %v, %d events}",
				p, got.From, got.Head, got.Resync, got.Fork, len(got.Events), len(got.Items),
				want.From, want.Head, want.Resync, want.Fork, len(want.Events))
		}
		for i, ev := range want.Events {
			g, it := got.Events[i], got.Items[i]
			if g.Position() != ev.Position() || g.TS != ev.TS || string(g.Body) != string(ev.Body) {
				t.Fatalf("since %s: event %d is %s (ts %d), the log's %s (ts %d)", p, i, g.Position(), g.TS, ev.Position(), ev.TS)
			}
			if !isEvent(it, room, ev.Position()) || it.TS() != ev.TS || string(it.Event.Body) != string(ev.Body) {
				t.Fatalf("since %s: item %d is {pos %s resync %v event %s ts %d}, want event %s (ts %d)",
					p, i, it.Pos, it.Resync, it.Event.ID(), it.TS(), ev.Position(), ev.TS)
			}
		}
	}
}

// positionsAround lists every position of epoch up to two past head, bare seqs, and a
// position in an epoch that never existed.
func positionsAround(epoch string, head uint64) []replay.Position {
	var ps []replay.Position
	for seq := uint64(0); seq <= head+2; seq++ {
		ps = append(ps, replay.Position{Epoch: epoch, Seq: seq}, replay.Position{Seq: seq})
	}
	return append(ps, replay.Position{Epoch: "gone", Seq: 1})
}

// TestSinceFollowsTheDeliveredOrder: the latest events answer resumes exactly as the
// log would, after live events, a repaired gap, a resync over a trimmed gap, a new
// epoch and a fork; and the items they give are the ones members got, encodings
// included.
func TestSinceFollowsTheDeliveredOrder(t *testing.T) {
	clock := replaytest.NewClock(time.Unix(1731312000, 0))
	l, bus, g := setup(t, replay.MemoryConfig{History: 30, HistoryTTL: time.Minute, Now: clock.Now}, Config{})
	const room = "lobby"
	m := join(t, g, room)

	ev := publish(t, l, room, 20)
	epoch := ev.Epoch
	items := map[uint64]*Item{}
	for seq := uint64(1); seq <= 20; seq++ {
		items[seq] = next(t, m)
	}
	// The member encodes the odd seqs before the resume, the resume the even ones.
	f := newCountingFraming(0, "sse")
	for seq := uint64(11); seq <= 20; seq += 2 {
		items[seq].Encoded(f.Framing)
	}
	rd, err := g.Since(context.Background(), room, replay.Position{Epoch: epoch, Seq: 10}, 100)
	if err != nil || len(rd.Events) != 10 || len(rd.Items) != 10 {
		t.Fatalf("since 10: %d events, %d items, %v", len(rd.Events), len(rd.Items), err)
	}
	for i, it := range rd.Items {
		seq := uint64(11 + i)
		if it != items[seq] {
			t.Fatalf("since 10: item %d is another item, want the one members were given", seq)
		}
		if seq%2 == 0 {
			it.Encoded(f.Framing)
		}
	}
	for i, it := range rd.Items {
		f.expectShared(t, items[uint64(11+i)], it)
	}
	if n := f.calls.Load(); n != 10 {
		t.Fatalf("10 events encoded %d times by the member and the resume, want 10", n)
	}
	if st := g.Stats(); st.HistoryReads != 0 || st.RecentHits != 1 {
		t.Fatalf("a resume inside the window: %+v, want one hit and no history read", st)
	}
	t.Run("live", func(t *testing.T) { expectSameAsLog(t, g, l, room, positionsAround(epoch, 20)) })

	t.Run("repaired gap", func(t *testing.T) {
		bus.setIntercept(dropSeqs(21, 23))
		publish(t, l, room, 5)
		expectEvents(t, m, epoch, 21, 25)
		bus.setIntercept(nil)
		expectSameAsLog(t, g, l, room, positionsAround(epoch, 25))
	})

	t.Run("resync over a trimmed gap", func(t *testing.T) {
		bus.setIntercept(func(replay.Event) []replay.Event { return nil })
		publish(t, l, room, 40) // 26..65; the log keeps 36..65
		bus.setIntercept(nil)
		head := publish(t, l, room, 1)
		if it := next(t, m); !it.Resync || it.Pos != head.Position() {
			t.Fatalf("got {pos %s resync %v}, want a resync at %s", it.Pos, it.Resync, head.Position())
		}
		expectSameAsLog(t, g, l, room, positionsAround(epoch, 66))
	})

	t.Run("new epoch", func(t *testing.T) {
		clock.Advance(2 * time.Minute)
		ev := publish(t, l, room, 3)
		if ev.Epoch == epoch {
			t.Fatal("the room kept its epoch past its history TTL")
		}
		if it := next(t, m); !it.Resync || it.Pos != (replay.Position{Epoch: ev.Epoch}) {
			t.Fatalf("got {pos %s resync %v}, want a resync at %s:0", it.Pos, it.Resync, ev.Epoch)
		}
		expectEvents(t, m, ev.Epoch, 1, 3)
		expectSameAsLog(t, g, l, room, append(positionsAround(ev.Epoch, 3), positionsAround(epoch, 66)...))
		epoch = ev.Epoch
	})

	t.Run("fork", func(t *testing.T) {
		// Members get seq 4 and 5 from the doorbell; the log that survived holds
		// another seq 4 and no 5. Until the repair, the window gives what members were
		// given; after it, what the log holds, and a resume from the lost 5 resyncs.
		bus.setIntercept(func(replay.Event) []replay.Event { return nil })
		bus.ring(room, replay.Event{Room: room, Epoch: epoch, Seq: 4, TS: 1, Body: []byte(`"lost"`)})
		bus.ring(room, replay.Event{Room: room, Epoch: epoch, Seq: 5, TS: 1, Body: []byte(`"lost"`)})
		expectEvents(t, m, epoch, 4, 5)
		if rd, _ := g.Since(context.Background(), room, replay.Position{Epoch: epoch, Seq: 3}, 10); len(rd.Events) != 2 || string(rd.Events[0].Body) != `"lost"` {
			t.Fatalf("before the repair a resume from 3 got %d events, want the 2 members were given", len(rd.Events))
		}
		real := publish(t, l, room, 1)
		bus.setIntercept(nil)
		bus.ring(room, replay.Event{})
		if it := next(t, m); !it.Resync || !it.Fork || it.Pos != real.Position() {
			t.Fatalf("got {pos %s resync %v fork %v}, want a fork at %s", it.Pos, it.Resync, it.Fork, real.Position())
		}
		expectSameAsLog(t, g, l, room, positionsAround(epoch, 5))
	})
}

// TestSinceItemsShareEncodings: a resume served from the window gets the items members
// were given and, for the events a window fill read, the ones every later resume gets:
// an encoding any of them made is the one the others get, not made again.
func TestSinceItemsShareEncodings(t *testing.T) {
	l, cl, g := newRecentRegistry(t, Config{})
	const room = "lobby"
	publish(t, l, room, 10)
	m := join(t, g, room)
	defer g.Leave(m)
	ev := publish(t, l, room, 10)
	sse, ws := newCountingFraming(0, "sse"), newCountingFraming(1, "ws")
	live := map[uint64]*Item{}
	for seq := uint64(11); seq <= 20; seq++ {
		it := next(t, m)
		if !isEvent(it, room, replay.Position{Epoch: ev.Epoch, Seq: seq}) {
			t.Fatalf("got item {pos %s resync %v}, want event %d", it.Pos, it.Resync, seq)
		}
		it.Encoded(sse.Framing)
		live[seq] = it
	}

	// The first resume from 5 fills the window with 1..10 from the log and is then
	// served from it, as is the second.
	after := replay.Position{Epoch: ev.Epoch, Seq: 5}
	since := func() Read {
		t.Helper()
		rd, err := g.Since(context.Background(), room, after, 100)
		if err != nil || len(rd.Items) != 15 || len(rd.Events) != 15 {
			t.Fatalf("since 5: %d events, %d items, %v; want 6..20", len(rd.Events), len(rd.Items), err)
		}
		for i, it := range rd.Items {
			if want := (replay.Position{Epoch: ev.Epoch, Seq: uint64(6 + i)}); !isEvent(it, room, want) || rd.Events[i].Position() != want {
				t.Fatalf("since 5: event %d is %s, item {pos %s resync %v}; want %s", i, rd.Events[i].Position(), it.Pos, it.Resync, want)
			}
		}
		return rd
	}
	first := since()
	for seq, it := range first.Items {
		if it.Pos.Seq <= 10 {
			it.Encoded(sse.Framing)
			it.Encoded(ws.Framing)
			continue
		}
		if it != live[it.Pos.Seq] {
			t.Fatalf("since 5: item %d is another item, want the one members were given", 6+seq)
		}
		sse.expectShared(t, live[it.Pos.Seq], it) // encoded by the member
		it.Encoded(ws.Framing)                    // and now by the resume
	}
	if st := g.Stats(); st.HistoryReads != 1 || st.RecentHits != 1 || cl.reads.Load() != 1 {
		t.Fatalf("the first resume: %+v, %d log reads; want the window fill's read and a hit", st, cl.reads.Load())
	}
	second := since()
	for i, it := range second.Items {
		if it != first.Items[i] {
			t.Fatalf("since 5, again: item %d is another item, want the one the window gave before", 6+i)
		}
		sse.expectShared(t, first.Items[i], it)
		ws.expectShared(t, first.Items[i], it)
		if seq := it.Pos.Seq; seq > 10 {
			ws.expectShared(t, live[seq], it) // the member gets the resume's encoding
		}
	}
	if s, w := sse.calls.Load(), ws.calls.Load(); s != 15 || w != 15 {
		t.Fatalf("15 events encoded %d times in sse and %d in ws by a member and two resumes, want 15 each", s, w)
	}
	if st := g.Stats(); st.HistoryReads != 1 || st.RecentHits != 2 {
		t.Fatalf("the second resume: %+v; want a hit and no further read", st)
	}
}

// recentTestLog counts the history reads the registry makes, and can hold them until
// released.
type recentTestLog struct {
	*replay.MemoryLog
	reads   atomic.Int64
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
}

func (l *recentTestLog) Since(ctx context.Context, room string, after replay.Position, limit int) ([]replay.Event, replay.Position, error) {
	l.reads.Add(1)
	l.mu.Lock()
	gate := l.gate
	l.gate = nil
	l.mu.Unlock()
	if gate != nil {
		l.entered <- struct{}{}
		<-gate
	}
	return l.MemoryLog.Since(ctx, room, after, limit)
}

// hold makes the next Since wait until the returned release is called; entered
// receives once it waits.
func (l *recentTestLog) hold() (release func()) {
	gate := make(chan struct{})
	l.mu.Lock()
	l.gate = gate
	l.mu.Unlock()
	return func() { close(gate) }
}

func newRecentRegistry(t *testing.T, cfg Config) (*replay.MemoryLog, *recentTestLog, *Registry) {
	t.Helper()
	l := newMemoryLog(t, replay.MemoryConfig{History: 1000})
	cl := &recentTestLog{MemoryLog: l, entered: make(chan struct{}, 16)}
	return l, cl, newRegistry(t, newFakeBus(l), cl, cfg)
}

// TestSinceStormSharesReads: concurrent resumes from positions spread over the room's
// history, on a pod that has delivered none of it, cost one read of the log (the
// window fill); resumes older than the window that ask for the same position share
// one read too, except that a read begun before a caller came is not the caller's.
func TestSinceStormSharesReads(t *testing.T) {
	l, cl, g := newRecentRegistry(t, Config{Recent: 300})
	const room = "lobby"
	ev := publish(t, l, room, 500)
	m := join(t, g, room)
	defer g.Leave(m)

	release := cl.hold()
	const callers = 100
	results := make([]Read, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			results[i], errs[i] = g.Since(context.Background(), room, replay.Position{Epoch: ev.Epoch, Seq: uint64(200 + i*3)}, 1000)
		})
	}
	await(t, cl.entered, "the window fill")
	release()
	wg.Wait()
	if n := cl.reads.Load(); n != 1 {
		t.Fatalf("%d resumes inside the window's reach cost %d reads, want 1", callers, n)
	}
	for i, rd := range results {
		after := uint64(200 + i*3)
		if errs[i] != nil || len(rd.Events) != int(500-after) || rd.Events[0].Seq != after+1 || rd.Head.Seq != 500 {
			t.Fatalf("resume after %d: %d events from %v, head %s, err %v", after, len(rd.Events), rd.Events, rd.Head, errs[i])
		}
	}

	// Older than the window: the callers that come while a read of their position
	// runs share the next one.
	cl.reads.Store(0)
	release = cl.hold()
	old := replay.Position{Epoch: ev.Epoch, Seq: 50}
	first := make(chan Read, 1)
	go func() { rd, _ := g.Since(context.Background(), room, old, 1000); first <- rd }()
	await(t, cl.entered, "the first read")
	for i := range callers {
		wg.Go(func() { results[i], errs[i] = g.Since(context.Background(), room, old, 1000) })
	}
	replaytest.Eventually(t, waitLimit, "every caller waiting", func() bool { return g.Stats().RecentMisses == callers+1 })
	release()
	wg.Wait()
	<-first
	if n := cl.reads.Load(); n != 2 {
		t.Fatalf("%d resumes from one position older than the window cost %d reads, want 2", callers+1, n)
	}
	for i, rd := range results {
		if errs[i] != nil || len(rd.Events) != 450 {
			t.Fatalf("resume %d after 50: %d events, %v", i, len(rd.Events), errs[i])
		}
	}
}

// TestRecentBounds: a room keeps at most Config.Recent events and RecentBytes, the
// pod MaxRecentBytes; a resume past what is kept reads the log; a room that expires
// releases what it kept.
func TestRecentBounds(t *testing.T) {
	// Every event here is publish's body in room "r" of the MemoryLog's 8-character
	// epochs, so every entry has one size: the body, and room for one encoding per
	// framing, made or not. A room that never holds more than 4 events has a ring of 4
	// slots.
	body := []byte(`{}`)
	size := int64(len(body)) + MaxFramings*int64(newItem(replay.Event{Room: "r", Epoch: "12345678", Seq: 1, Body: body}).size())
	const ring = 4 * slotSize
	cases := []struct {
		name string
		cfg  Config
		kept int // events one room keeps
	}{
		{"by count", Config{Recent: 4}, 4},
		{"by room bytes", Config{RecentBytes: ring + 3*size}, 3},
		{"by pod bytes", Config{MaxRecentBytes: ring + 2*size}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Linger = -1
			l, cl, g := newRecentRegistry(t, tc.cfg)
			m := join(t, g, "r")
			ev := publish(t, l, "r", 9)
			expectEvents(t, m, ev.Epoch, 1, 9)
			epoch := ev.Epoch
			if entrySize(newItem(ev)) != size {
				t.Fatalf("event %s (epoch %q, type %q): the sizes above assume an 8-character epoch and no type", ev.ID(), ev.Epoch, ev.Type)
			}
			if st := g.Stats(); st.RecentBytes != ring+int64(tc.kept)*size {
				t.Fatalf("%d bytes kept, want a ring and %d events' worth", st.RecentBytes, tc.kept)
			}
			hit := replay.Position{Epoch: epoch, Seq: uint64(9 - tc.kept)}
			if _, err := g.Since(context.Background(), "r", hit, 100); err != nil || cl.reads.Load() != 0 {
				t.Fatalf("resume from %s: %d reads, %v; want it served from the kept events", hit, cl.reads.Load(), err)
			}
			miss := replay.Position{Epoch: epoch, Seq: hit.Seq - 1}
			if rd, err := g.Since(context.Background(), "r", miss, 100); err != nil || len(rd.Events) != tc.kept+1 || cl.reads.Load() == 0 {
				t.Fatalf("resume from %s: %d events, %d reads, %v; want it read from the log", miss, len(rd.Events), cl.reads.Load(), err)
			}
			if st := g.Stats(); st.RecentBytes != ring+int64(tc.kept)*size {
				t.Fatalf("after a fill that has no room: %d bytes kept, want a ring and %d events' worth", st.RecentBytes, tc.kept)
			}
			g.Leave(m)
			replaytest.Eventually(t, waitLimit, "the room expired", func() bool { return g.Stats().Rooms == 0 })
			if st := g.Stats(); st.RecentBytes != 0 {
				t.Fatalf("the room expired and %d bytes stay kept", st.RecentBytes)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		l, cl, g := newRecentRegistry(t, Config{MaxRecentBytes: -1})
		m := join(t, g, "r")
		ev := publish(t, l, "r", 3)
		expectEvents(t, m, ev.Epoch, 1, 3)
		rd, err := g.Since(context.Background(), "r", replay.Position{Epoch: ev.Epoch, Seq: 2}, 10)
		if err != nil || len(rd.Events) != 1 || cl.reads.Load() != 1 || g.Stats().RecentBytes != 0 {
			t.Fatalf("with no events kept: %d events, %d reads, %v", len(rd.Events), cl.reads.Load(), err)
		}
	})
}

// TestSinceFillFailureIsRetried: a window fill that fails is tried again by the next
// resume, and its error reaches the resumes that waited for it only when every try
// failed.
func TestSinceFillFailureIsRetried(t *testing.T) {
	l := newMemoryLog(t, replay.MemoryConfig{})
	sl := &steeredLog{MemoryLog: l, entered: make(chan struct{}, 1)}
	g := newRegistry(t, newFakeBus(l), sl, Config{})
	ev := publish(t, l, "r", 10)
	m := join(t, g, "r")
	defer g.Leave(m)
	sl.mu.Lock()
	sl.failNext = errBoom
	sl.mu.Unlock()
	rd, err := g.Since(context.Background(), "r", replay.Position{Epoch: ev.Epoch, Seq: 4}, 100)
	if err != nil || len(rd.Events) != 6 {
		t.Fatalf("after a failed fill: %d events, %v; want the 6 after 4", len(rd.Events), err)
	}
	if st := g.Stats(); st.HistoryReads != 2 {
		t.Fatalf("%d history reads, want the failed fill and its retry", st.HistoryReads)
	}
}

// TestSinceWhileTheRoomMoves: a window fill held while the room delivers more events
// still answers every event after the resume point up to what the room delivered,
// which a member that joined before the read has in its queue after its start; a
// fill held while the room resyncs puts nothing in the new window.
func TestSinceWhileTheRoomMoves(t *testing.T) {
	t.Run("live events", func(t *testing.T) {
		l, cl, g := newRecentRegistry(t, Config{})
		ev := publish(t, l, "r", 50)
		m := join(t, g, "r")
		defer g.Leave(m)
		release := cl.hold()
		got := make(chan Read, 1)
		go func() {
			rd, err := g.Since(context.Background(), "r", replay.Position{Epoch: ev.Epoch, Seq: 10}, 1000)
			if err != nil {
				t.Error(err)
			}
			got <- rd
		}()
		await(t, cl.entered, "the window fill")
		publish(t, l, "r", 5)
		var live []*Item
		for seq := uint64(51); seq <= 55; seq++ {
			it := next(t, m)
			if !isEvent(it, "r", replay.Position{Epoch: ev.Epoch, Seq: seq}) {
				t.Fatalf("got item {pos %s resync %v}, want event %d", it.Pos, it.Resync, seq)
			}
			live = append(live, it)
		}
		release()
		rd := await(t, got, "the resume")
		if len(rd.Events) != 45 || rd.Events[0].Seq != 11 || rd.Head.Seq != 55 {
			t.Fatalf("resume after 10 while 51..55 were delivered: %d events from %d, head %s; want 11..55",
				len(rd.Events), rd.Events[0].Seq, rd.Head)
		}
		for i, e := range rd.Events {
			if it := rd.Items[i]; e.Seq != uint64(11+i) || !isEvent(it, "r", e.Position()) {
				t.Fatalf("event %d: %s with item {pos %s resync %v event %s}", i, e.Position(), it.Pos, it.Resync, it.Event.ID())
			}
		}
		for i, it := range live { // delivered while the fill was held: the window's own
			if rd.Items[40+i] != it {
				t.Fatalf("event %d: another item than the one the member was given", 51+i)
			}
		}
		if n := cl.reads.Load(); n != 1 {
			t.Fatalf("%d reads, want the one fill", n)
		}
	})

	t.Run("resync", func(t *testing.T) {
		l := newMemoryLog(t, replay.MemoryConfig{History: 20})
		cl := &recentTestLog{MemoryLog: l, entered: make(chan struct{}, 16)}
		bus := newFakeBus(l)
		g := newRegistry(t, bus, cl, Config{})
		ev := publish(t, l, "r", 15)
		m := join(t, g, "r")
		defer g.Leave(m)
		release := cl.hold()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := g.Since(context.Background(), "r", replay.Position{Epoch: ev.Epoch, Seq: 5}, 1000); err != nil {
				t.Error(err)
			}
		}()
		await(t, cl.entered, "the window fill")
		// 16..40 ring nobody and trim the log to 21..40; 41 shows the gap.
		bus.setIntercept(func(replay.Event) []replay.Event { return nil })
		publish(t, l, "r", 25)
		bus.setIntercept(nil)
		head := publish(t, l, "r", 1)
		if it := next(t, m); !it.Resync || it.Pos != head.Position() {
			t.Fatalf("got {pos %s resync %v}, want a resync at %s", it.Pos, it.Resync, head.Position())
		}
		release()
		<-done
		expectSameAsLog(t, g, cl, "r", positionsAround(ev.Epoch, head.Seq))
	})
}
