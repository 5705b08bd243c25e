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
// read of the log does: the same events with their frames, the same resync point,
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
			len(got.Events) != len(want.Events) || len(got.Frames) != len(got.Events) {
			t.Fatalf("since %s: got {from %s head %s resync %v fork %v, %d events, %d frames}, the log {from %s head %s resync %v fork %v, %d events}",
				p, got.From, got.Head, got.Resync, got.Fork, len(got.Events), len(got.Frames),
				want.From, want.Head, want.Resync, want.Fork, len(want.Events))
		}
		for i, ev := range want.Events {
			if g := got.Events[i]; g.Position() != ev.Position() || g.TS != ev.TS || string(g.Body) != string(ev.Body) ||
				string(got.Frames[i]) != string(testFrame(ev)) {
				t.Fatalf("since %s: event %d is %s (ts %d, frame %q), the log's %s (ts %d)", p, i, g.Position(), g.TS, got.Frames[i], ev.Position(), ev.TS)
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
// epoch and a fork; and the frames they give are the ones members got.
func TestSinceFollowsTheDeliveredOrder(t *testing.T) {
	clock := replaytest.NewClock(time.Unix(1731312000, 0))
	l, bus, g := setup(t, replay.MemoryConfig{History: 30, HistoryTTL: time.Minute, Now: clock.Now}, Config{})
	const room = "lobby"
	m := join(t, g, room)

	ev := publish(t, l, room, 20)
	epoch := ev.Epoch
	frames := map[uint64][]byte{}
	for seq := uint64(1); seq <= 20; seq++ {
		frames[seq] = next(t, m).Frame
	}
	rd, err := g.Since(context.Background(), room, replay.Position{Epoch: epoch, Seq: 10}, 100)
	if err != nil || len(rd.Events) != 10 {
		t.Fatalf("since 10: %d events, %v", len(rd.Events), err)
	}
	for i, f := range rd.Frames {
		if &f[0] != &frames[uint64(11+i)][0] {
			t.Fatalf("since 10: frame %d is a copy, want the bytes members were given", 11+i)
		}
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
	// Frames here are ids, "<8-character epoch>:<seq>": one size for seqs 1..9. A
	// room that never holds more than 4 events has a ring of 4 slots.
	size := entrySize(replay.Event{Body: []byte(`{}`)}, []byte("12345678:1"))
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
			if entrySize(ev, testFrame(ev)) != size {
				t.Fatalf("epoch %q: the sizes above assume 8 characters", ev.Epoch)
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
		expectEvents(t, m, ev.Epoch, 51, 55)
		release()
		rd := await(t, got, "the resume")
		if len(rd.Events) != 45 || rd.Events[0].Seq != 11 || rd.Head.Seq != 55 {
			t.Fatalf("resume after 10 while 51..55 were delivered: %d events from %d, head %s; want 11..55",
				len(rd.Events), rd.Events[0].Seq, rd.Head)
		}
		for i, e := range rd.Events {
			if e.Seq != uint64(11+i) || string(rd.Frames[i]) != e.ID() {
				t.Fatalf("event %d: %s with frame %q", i, e.Position(), rd.Frames[i])
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
