package rooms

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// collect reads n items from m on its own goroutine, releasing each. It returns an
// error instead of failing the test, so it can run off the test goroutine.
func collect(m *Member, n int) ([]*Item, error) {
	items := make([]*Item, 0, n)
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for len(items) < n {
		it, ok := take(m, timer.C)
		if !ok {
			return items, fmt.Errorf("got %d of %d items within %s (reason %s)", len(items), n, waitLimit, m.Reason())
		}
		m.Release(it)
		items = append(items, it)
	}
	return items, nil
}

// checkDense reports the first item that is not event seq 1, 2, … of one epoch.
func checkDense(items []*Item) error {
	if len(items) == 0 {
		return nil
	}
	epoch, room := items[0].Pos.Epoch, items[0].Event.Room
	for i, it := range items {
		want := replay.Position{Epoch: epoch, Seq: uint64(i + 1)}
		if !isEvent(it, room, want) {
			return fmt.Errorf("item %d is {pos %s resync %v event %s}, want event %s", i, it.Pos, it.Resync, it.Event.ID(), want)
		}
	}
	return nil
}

// publishConcurrently appends n events to room from the given number of goroutines.
func publishConcurrently(t *testing.T, l *replay.MemoryLog, room string, n, publishers int) {
	t.Helper()
	var wg sync.WaitGroup
	for p := range publishers {
		share := n / publishers
		if p < n%publishers {
			share++
		}
		wg.Go(func() {
			for range share {
				if _, err := l.Append(context.Background(), room, replay.Message{Body: json.RawMessage(`{}`)}); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// receiveAll joins members of room, publishes n events from publishers goroutines and
// checks that every member receives seq 1..n exactly once, in order, and nothing else.
func receiveAll(t *testing.T, l *replay.MemoryLog, g *Registry, room string, members, n, publishers int) {
	t.Helper()
	ms := make([]*Member, members)
	for i := range ms {
		ms[i] = join(t, g, room)
	}
	errs := make([]error, members)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			items, err := collect(m, n)
			if err == nil {
				err = checkDense(items)
			}
			errs[i] = err
		})
	}
	publishConcurrently(t, l, room, n, publishers)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	for _, m := range ms {
		expectEmpty(t, m)
		if m.Reason() != 0 {
			t.Fatalf("member closed with %s", m.Reason())
		}
	}
}

func TestFanoutOrderAndDedupe(t *testing.T) {
	const events = 1000
	l, _, g := setup(t, replay.MemoryConfig{History: events}, Config{Queue: 2 * events})
	receiveAll(t, l, g, "lobby", 8, events, 4)
	if st := g.Stats(); st.SlowDrops != 0 || st.Resyncs != 0 {
		t.Fatalf("Stats = %+v, want no drops or resyncs", st)
	}
}

func TestGapRepair(t *testing.T) {
	tests := []struct {
		name        string
		repairBatch int
		events      int
		publishers  int
		intercept   func() func(replay.Event) []replay.Event
	}{
		{
			name:       "rings 5..9 swallowed",
			events:     12,
			publishers: 1,
			intercept:  func() func(replay.Event) []replay.Event { return dropSeqs(5, 9) },
		},
		{
			name:       "ring 5 arrives after ring 6",
			events:     12,
			publishers: 1,
			intercept: func() func(replay.Event) []replay.Event {
				var held replay.Event
				return func(ev replay.Event) []replay.Event {
					switch ev.Seq {
					case 5:
						held = ev
						return nil
					case 6:
						return []replay.Event{ev, held}
					}
					return []replay.Event{ev}
				}
			},
		},
		{
			name:       "every ring delivered twice",
			events:     50,
			publishers: 1,
			intercept: func() func(replay.Event) []replay.Event {
				return func(ev replay.Event) []replay.Event { return []replay.Event{ev, ev} }
			},
		},
		{
			name:        "gap longer than one repair batch",
			repairBatch: 4,
			events:      50,
			publishers:  1,
			intercept:   func() func(replay.Event) []replay.Event { return dropSeqs(3, 40) },
		},
		{
			name:        "every seventh ring lost under concurrent publishers",
			repairBatch: 8,
			events:      700,
			publishers:  4,
			intercept: func() func(replay.Event) []replay.Event {
				// The last ring always arrives, so a gap at the end is noticed.
				return func(ev replay.Event) []replay.Event {
					if ev.Seq%7 == 0 && ev.Seq < 700 {
						return nil
					}
					return []replay.Event{ev}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, bus, g := setup(t, replay.MemoryConfig{History: 1000}, Config{Queue: 1024, RepairBatch: tt.repairBatch})
			bus.setIntercept(tt.intercept())
			receiveAll(t, l, g, "lobby", 3, tt.events, tt.publishers)
			if st := g.Stats(); st.Resyncs != 0 || st.SlowDrops != 0 {
				t.Fatalf("Stats = %+v, want no resyncs or drops", st)
			}
		})
	}
}

func TestZeroRingRepairs(t *testing.T) {
	l, bus, g := setup(t, replay.MemoryConfig{}, Config{})
	m := join(t, g, "lobby")
	ev := publish(t, l, "lobby", 3)
	expectEvents(t, m, ev.Epoch, 1, 3)

	bus.setIntercept(dropSeqs(4, 6))
	publish(t, l, "lobby", 3)
	expectEmpty(t, m)
	repairs := g.Stats().Repairs

	bus.ring("lobby", replay.Event{}) // "events may have been missed"
	expectEvents(t, m, ev.Epoch, 4, 6)
	if got := g.Stats().Repairs; got != repairs+1 {
		t.Fatalf("Repairs = %d, want %d", got, repairs+1)
	}
	publish(t, l, "lobby", 1)
	expectEvents(t, m, ev.Epoch, 7, 7)
	expectEmpty(t, m)

	// A zero ring with nothing missed delivers nothing.
	bus.ring("lobby", replay.Event{})
	publish(t, l, "lobby", 1)
	expectEvents(t, m, ev.Epoch, 8, 8)
	expectEmpty(t, m)
}

// expectResync takes one item from m and checks it is a resync notice at head for the
// history lost after `after`, a fork or not, carrying no event.
func expectResync(t *testing.T, m *Member, head, after replay.Position, fork bool) {
	t.Helper()
	it := next(t, m)
	ev := &it.Event
	if !it.Resync || it.Pos != head || it.After != after || it.Fork != fork ||
		ev.Room != "" || ev.Epoch != "" || ev.Seq != 0 || ev.TS != 0 || ev.Type != "" || ev.Body != nil {
		t.Fatalf("got item {pos %s resync %v after %s fork %v event %s of %q}, want a resync at %s after %s, fork %v, with no event",
			it.Pos, it.Resync, it.After, it.Fork, ev.ID(), ev.Room, head, after, fork)
	}
}

func TestResyncBeyondRetainedLog(t *testing.T) {
	tests := []struct {
		name      string
		delivered int // events delivered before the rings are lost
		lost      int // events appended while the bus swallows rings
	}{
		{name: "after delivered events", delivered: 5, lost: 50},
		{name: "as the first item", delivered: 0, lost: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, bus, g := setup(t, replay.MemoryConfig{History: 10}, Config{})
			ms := []*Member{join(t, g, "lobby"), join(t, g, "lobby")}
			var epoch string
			if tt.delivered > 0 {
				epoch = publish(t, l, "lobby", tt.delivered).Epoch
				for _, m := range ms {
					expectEvents(t, m, epoch, 1, uint64(tt.delivered))
				}
			}
			bus.setIntercept(func(replay.Event) []replay.Event { return nil })
			publish(t, l, "lobby", tt.lost)
			for _, m := range ms {
				expectEmpty(t, m)
			}
			bus.setIntercept(nil)
			head := publish(t, l, "lobby", 1).Position()
			after := replay.Position{Epoch: epoch, Seq: uint64(tt.delivered)} // the zero position when nothing was
			for _, m := range ms {
				expectResync(t, m, head, after, false)
			}
			publish(t, l, "lobby", 4)
			for _, m := range ms {
				expectEvents(t, m, head.Epoch, head.Seq+1, head.Seq+4)
				expectEmpty(t, m)
			}
			if st := g.Stats(); st.Resyncs != 1 {
				t.Fatalf("Stats = %+v, want exactly one resync", st)
			}
		})
	}
}

func TestEpochChangeResyncs(t *testing.T) {
	clock := replaytest.NewClock(time.Unix(1731312000, 0))
	l, _, g := setup(t, replay.MemoryConfig{HistoryTTL: time.Minute, Now: clock.Now}, Config{})
	ms := []*Member{join(t, g, "lobby"), join(t, g, "lobby")}
	old := publish(t, l, "lobby", 3)
	for _, m := range ms {
		expectEvents(t, m, old.Epoch, 1, 3)
	}

	clock.Advance(2 * time.Minute) // the room's history is forgotten
	first := publish(t, l, "lobby", 1)
	if first.Epoch == old.Epoch || first.Seq != 1 {
		t.Fatalf("after the history TTL the log appended %s, want seq 1 of a new epoch", first.ID())
	}
	// The resync is at the point before the new epoch's first event, which follows.
	for _, m := range ms {
		expectResync(t, m, replay.Position{Epoch: first.Epoch}, old.Position(), false)
		expectEvents(t, m, first.Epoch, 1, 1)
	}
	publish(t, l, "lobby", 2)
	for _, m := range ms {
		expectEvents(t, m, first.Epoch, 2, 3)
		expectEmpty(t, m)
	}
	if st := g.Stats(); st.Resyncs != 1 {
		t.Fatalf("Stats = %+v, want exactly one resync", st)
	}
}

func TestSlowConsumer(t *testing.T) {
	// Every item weighs unit bytes: publish's body in "lobby", with the MemoryLog's
	// 8-character epochs and no type (checked as the events are published). The byte
	// budgets are above an item's average share, so each item is charged.
	unit := int64(newItem(replay.Event{Room: "lobby", Epoch: "12345678", Body: json.RawMessage(`{}`)}).size())
	tests := []struct {
		name       string
		queue      int
		queueBytes int64
		idleKeeps  int // items the idle member holds when it is closed
	}{
		{name: "queue length", queue: 4, idleKeeps: 4},
		{name: "queue bytes", queue: 100, queueBytes: unit * 5 / 2, idleKeeps: 2},
		{name: "item larger than the byte budget", queue: 100, queueBytes: unit / 2, idleKeeps: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _, g := setup(t, replay.MemoryConfig{}, Config{Queue: tt.queue, QueueBytes: tt.queueBytes})
			reader, idle := join(t, g, "lobby"), join(t, g, "lobby")
			var epoch string
			for seq := uint64(1); seq <= 9; seq++ {
				ev := publish(t, l, "lobby", 1)
				if n := int64(newItem(ev).size()); n != unit {
					t.Fatalf("event %s (epoch %q) weighs %d bytes, want %d", ev.ID(), ev.Epoch, n, unit)
				}
				epoch = ev.Epoch
				expectEvents(t, reader, epoch, seq, seq)
			}
			expectEmpty(t, reader)
			if reader.Reason() != 0 {
				t.Fatalf("reader closed with %s", reader.Reason())
			}
			select {
			case <-idle.Done():
			default:
				t.Fatal("idle member still open")
			}
			if idle.Reason() != ReasonSlowConsumer {
				t.Fatalf("idle member closed with %s, want %s", idle.Reason(), ReasonSlowConsumer)
			}
			// It keeps what it had queued, in order, and nothing after its close.
			expectEvents(t, idle, epoch, 1, uint64(tt.idleKeeps))
			expectEmpty(t, idle)
			if st := g.Stats(); st.SlowDrops != 1 {
				t.Fatalf("Stats = %+v, want one slow drop", st)
			}
			g.Leave(idle)
			if idle.Reason() != ReasonSlowConsumer {
				t.Fatalf("Leave replaced the close reason with %s", idle.Reason())
			}
		})
	}

	t.Run("budget not released", func(t *testing.T) {
		l, _, g := setup(t, replay.MemoryConfig{}, Config{Queue: 100, QueueBytes: unit * 5 / 2})
		m := join(t, g, "lobby")
		for range 2 {
			publish(t, l, "lobby", 1)
			if _, ok := take(m, time.After(waitLimit)); !ok { // taken, never released
				t.Fatal("no item")
			}
		}
		expectEmpty(t, m)
		publish(t, l, "lobby", 1)
		if m.Reason() != ReasonSlowConsumer {
			t.Fatalf("reason %s, want %s: the byte budget must count items until they are released", m.Reason(), ReasonSlowConsumer)
		}
	})
}

// steeredLog is a Log over a MemoryLog whose next Since can be held after it has read
// (so rings arrive while a repair is in flight) or fail once.
type steeredLog struct {
	*replay.MemoryLog

	mu       sync.Mutex
	gate     chan struct{}
	failNext error
	entered  chan struct{}
}

func (l *steeredLog) Since(ctx context.Context, room string, after replay.Position, limit int) ([]replay.Event, replay.Position, error) {
	evs, head, err := l.MemoryLog.Since(ctx, room, after, limit)
	l.mu.Lock()
	gate, fail := l.gate, l.failNext
	l.gate, l.failNext = nil, nil
	l.mu.Unlock()
	if gate != nil {
		l.entered <- struct{}{}
		<-gate
	}
	if fail != nil {
		return nil, replay.Position{}, fail
	}
	return evs, head, err
}

func TestRepair(t *testing.T) {
	newSteered := func(t *testing.T) (*replay.MemoryLog, *fakeBus, *steeredLog, *Registry) {
		l := newMemoryLog(t, replay.MemoryConfig{})
		bus := newFakeBus(l)
		sl := &steeredLog{MemoryLog: l, entered: make(chan struct{}, 1)}
		return l, bus, sl, newRegistry(t, bus, sl, Config{})
	}

	t.Run("ring during the repair read", func(t *testing.T) {
		l, bus, sl, g := newSteered(t)
		m := join(t, g, "lobby")
		epoch := publish(t, l, "lobby", 1).Epoch
		expectEvents(t, m, epoch, 1, 1)

		bus.setIntercept(dropSeqs(2, 2))
		publish(t, l, "lobby", 1)
		release := make(chan struct{})
		sl.mu.Lock()
		sl.gate = release
		sl.mu.Unlock()
		publish(t, l, "lobby", 1) // ring 3 shows the gap: the repair reads 2..3 and is held
		await(t, sl.entered, "the repair read")
		publish(t, l, "lobby", 1) // ring 4 arrives while the repair is in flight
		expectEmpty(t, m)
		close(release)
		// Seq 4 is not in the read that was in flight: the repair must read again.
		expectEvents(t, m, epoch, 2, 4)
		publish(t, l, "lobby", 1)
		expectEvents(t, m, epoch, 5, 5)
		expectEmpty(t, m)
	})

	t.Run("failed read is retried", func(t *testing.T) {
		l, bus, sl, g := newSteered(t)
		m := join(t, g, "lobby")
		sl.mu.Lock()
		sl.failNext = errBoom
		sl.mu.Unlock()
		bus.setIntercept(dropSeqs(1, 2))
		epoch := publish(t, l, "lobby", 3).Epoch // ring 3 starts a repair whose first read fails
		expectEvents(t, m, epoch, 1, 3)
		expectEmpty(t, m)
		if st := g.Stats(); st.Resyncs != 0 || st.Repairs != 1 {
			t.Fatalf("Stats = %+v, want one repair and no resync", st)
		}
	})
}

// TestForkedHistoryResyncs: members saw an event at seq 4 that the log does not hold
// (a primary failed over before replicating it and the seq went to another event).
// The repair must notice and resync, not skip the log's seq 4 as already delivered.
func TestForkedHistoryResyncs(t *testing.T) {
	l, bus, g := setup(t, replay.MemoryConfig{}, Config{})
	m := join(t, g, "lobby")
	ev := publish(t, l, "lobby", 3)
	expectEvents(t, m, ev.Epoch, 1, 3)

	// The doorbell delivers a seq 4 that never reached the log that survived.
	bus.setIntercept(func(e replay.Event) []replay.Event { return nil })
	bus.ring("lobby", replay.Event{Room: "lobby", Epoch: ev.Epoch, Seq: 4, TS: 1, Body: []byte(`"lost"`)})
	expectEvents(t, m, ev.Epoch, 4, 4)
	real := publish(t, l, "lobby", 2) // the log's own seq 4 and 5
	bus.setIntercept(nil)

	bus.ring("lobby", replay.Event{}) // resubscribed: read the log
	expectResync(t, m, real.Position(), replay.Position{Epoch: ev.Epoch, Seq: 4}, true)
	if st := g.Stats(); st.Forks != 1 || st.Resyncs != 1 {
		t.Fatalf("Stats = %+v, want one fork resynced", st)
	}
	publish(t, l, "lobby", 1)
	expectEvents(t, m, ev.Epoch, 6, 6)
	expectEmpty(t, m)
}
