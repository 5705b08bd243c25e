package rooms

import (
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// kilo is the weight of the items the budget tests publish (publishSized): 1,000
// bytes, below the queues' average share (QueueBytes / Queue), so the budget's
// estimate counts them through the room's mean small item.
const kilo = 1000

func TestPodBudgetClosesFurthestBehindFirst(t *testing.T) {
	// The scan is driven by hand: the background one would race the assertions.
	l, _, g := setup(t, replay.MemoryConfig{}, Config{
		Queue: 1000, QueueBytes: 1 << 20, MaxQueuedBytes: 10_000, BudgetInterval: time.Hour,
	})
	furthest, reader := join(t, g, "lobby"), join(t, g, "lobby")
	epoch := publishSized(t, l, "lobby", 1, kilo).Epoch
	next(t, reader)
	for range 7 {
		publishSized(t, l, "lobby", 1, kilo)
		next(t, reader)
	}
	behind := join(t, g, "lobby")
	for range 4 {
		publishSized(t, l, "lobby", 1, kilo)
		next(t, reader)
	}
	// furthest holds 12,000 bytes, behind 4,000, reader none: 16,000 > 10,000.
	if got := g.enforceBudget(); got != 1 {
		t.Fatalf("enforceBudget closed %d members, want 1", got)
	}
	if furthest.Reason() != ReasonSlowConsumer {
		t.Fatalf("the member furthest behind: reason %s, want %s", furthest.Reason(), ReasonSlowConsumer)
	}
	if behind.Reason() != 0 || reader.Reason() != 0 {
		t.Fatalf("closed too many: behind %s, reader %s", behind.Reason(), reader.Reason())
	}
	st := g.Stats()
	if st.BudgetDrops != 1 || st.SlowDrops != 1 {
		t.Fatalf("Stats = %+v, want one budget drop counted as a slow drop", st)
	}
	if st.QueuedBytes != 4000 {
		t.Fatalf("QueuedBytes = %d, want 4000 (behind's queue) after the close", st.QueuedBytes)
	}

	// The reader keeps up, behind now falls further: it is the next to go, the
	// reader never.
	for range 7 {
		publishSized(t, l, "lobby", 1, kilo)
		next(t, reader)
	}
	if got := g.enforceBudget(); got != 1 || behind.Reason() != ReasonSlowConsumer || reader.Reason() != 0 {
		t.Fatalf("closed %d; behind %s, reader %s", got, behind.Reason(), reader.Reason())
	}
	if st := g.Stats(); st.QueuedBytes > 10_000 || st.BudgetDrops != 2 {
		t.Fatalf("Stats = %+v, want the total within the budget after two drops", st)
	}
	// Closed members keep what they had, in order, and resume by id from there.
	for seq := uint64(1); seq <= 12; seq++ {
		if it := next(t, furthest); it.Pos != (replay.Position{Epoch: epoch, Seq: seq}) {
			t.Fatalf("closed member's item %d: %s", seq, it.Pos)
		}
	}
	expectEmpty(t, furthest)
}

func TestPodBudgetUnderIt(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{}, Config{
		Queue: 1000, QueueBytes: 1 << 20, MaxQueuedBytes: 10_000, BudgetInterval: time.Hour,
	})
	a, b := join(t, g, "lobby"), join(t, g, "lobby")
	publishSized(t, l, "lobby", 5, kilo)
	if got := g.enforceBudget(); got != 0 || a.Reason() != 0 || b.Reason() != 0 {
		t.Fatalf("closed %d at exactly the budget", got)
	}
	if st := g.Stats(); st.QueuedBytes != 10_000 {
		t.Fatalf("QueuedBytes = %d, want 10000", st.QueuedBytes)
	}
}

func TestPodBudgetScansInTheBackground(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{}, Config{
		Queue: 1000, QueueBytes: 1 << 20, MaxQueuedBytes: 5_000, BudgetInterval: 10 * time.Millisecond,
	})
	idle := join(t, g, "lobby")
	publishSized(t, l, "lobby", 6, kilo)
	await(t, idle.Done(), "the idle member's close by the budget scan")
	if idle.Reason() != ReasonSlowConsumer {
		t.Fatalf("reason %s", idle.Reason())
	}
	// The counters follow the close.
	replaytest.Eventually(t, waitLimit, "the budget drop counted", func() bool { return g.Stats().BudgetDrops == 1 })
}

func TestPodBudgetOffByDefault(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{}, Config{Queue: 1000, QueueBytes: 1 << 20})
	m := join(t, g, "lobby")
	publishSized(t, l, "lobby", 50, kilo)
	if got := g.enforceBudget(); got != 0 || m.Reason() != 0 {
		t.Fatalf("closed %d with no budget", got)
	}
}

func TestQueuedEstimateCountsSmallItems(t *testing.T) {
	// Small items are not charged one by one, yet the budget's estimate counts
	// them: 200-byte items, exactly the queue's average share, in a queue long
	// enough to hold them all by count.
	const weight = 200
	l, _, g := setup(t, replay.MemoryConfig{}, Config{Queue: 100, QueueBytes: 100 * weight})
	m := join(t, g, "lobby")
	ev := publishSized(t, l, "lobby", 3, weight)
	if st := g.Stats(); st.Members != 1 {
		t.Fatal(st)
	}
	if got := m.Charge(newItem(ev)); got != 0 {
		t.Fatalf("a %d-byte item is charged %d bytes, want none (a small item)", weight, got)
	}
	if got := m.queued(); got != 3*weight {
		t.Fatalf("queued %d bytes, want %d (three %d-byte items)", got, 3*weight, weight)
	}
	next(t, m)
	if got := m.queued(); got != 2*weight {
		t.Fatalf("queued %d bytes after taking one, want %d", got, 2*weight)
	}
}
