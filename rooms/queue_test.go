package rooms

import (
	"testing"

	"github.com/roomcast/roomcast/replay"
)

// TestQueueGrowsOnce: a member's queue starts short and, the first time it fills up,
// is replaced by one of the configured length; the reader gets every item in order
// across the switch, and the member then holds at most Queue + firstQueue items.
func TestQueueGrowsOnce(t *testing.T) {
	const length = 100
	l, _, g := setup(t, replay.MemoryConfig{History: 1000}, Config{Queue: length})
	m := join(t, g, "lobby")
	short := m.Queue()
	if cap(short) != firstQueue {
		t.Fatalf("a new member's queue holds %d items, want %d", cap(short), firstQueue)
	}

	// A reader that holds the short queue while it is replaced still gets its items
	// first, then finds it closed and moves on.
	ev := publish(t, l, "lobby", firstQueue+length)
	if m.Reason() != 0 {
		t.Fatalf("member closed (%s) with %d items queued, want room for Queue + %d", m.Reason(), firstQueue+length, firstQueue)
	}
	for i := range firstQueue {
		it, ok := <-short
		if !ok || it.Pos.Seq != uint64(i+1) {
			t.Fatalf("short queue item %d: %v (open %v), want seq %d", i, it, ok, i+1)
		}
		m.Release(it)
	}
	if _, ok := <-short; ok {
		t.Fatal("the short queue is still open after its last item, though it was replaced")
	}
	long := m.Queue()
	if cap(long) != length {
		t.Fatalf("the replacing queue holds %d items, want %d", cap(long), length)
	}
	items, err := collect(m, length)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if want := uint64(firstQueue + i + 1); it.Pos.Seq != want {
			t.Fatalf("item %d after the switch: seq %d, want %d", i, it.Pos.Seq, want)
		}
	}
	if items[len(items)-1].Pos != ev.Position() {
		t.Fatalf("last item %s, want %s", items[len(items)-1].Pos, ev.Position())
	}

	// Full at its full length, the queue does not grow again.
	publish(t, l, "lobby", length+1)
	if m.Reason() != ReasonSlowConsumer {
		t.Fatalf("reason %s after %d more items, want %s", m.Reason(), length+1, ReasonSlowConsumer)
	}
}

// TestQueueNotFullBeforeItsLength: the short first queue is never what a slow
// consumer is measured against.
func TestQueueNotFullBeforeItsLength(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{History: 1000}, Config{Queue: 4 * firstQueue})
	m := join(t, g, "lobby")
	publish(t, l, "lobby", 4*firstQueue)
	if m.Reason() != 0 {
		t.Fatalf("member closed (%s) with its configured length queued", m.Reason())
	}
	items, err := collect(m, 4*firstQueue)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDense(items); err != nil {
		t.Fatal(err)
	}
	expectEmpty(t, m)
}
