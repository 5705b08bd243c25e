package replay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// gateway/README.md promises that a retry with the same key within the idempotency TTL
// returns the original answer: the memory log keeps every key for its TTL, however
// many a room has, within the byte budget.
func TestMemoryIdempotencyHoldsForTheWholeTTL(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l := newMemory(t, replay.MemoryConfig{Now: c.Now})
	ctx := context.Background()
	const n = 25_000
	var first replay.Event
	for i := range n {
		m := msg
		m.IdempotencyKey = fmt.Sprintf("key-%d", i)
		ev, err := l.Append(ctx, "r", m)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if i == 0 {
			first = ev
		}
	}
	c.Add(59 * time.Minute)
	m := msg
	m.IdempotencyKey = "key-0"
	again, err := l.Append(ctx, "r", m)
	if err != nil {
		t.Fatal(err)
	}
	if again.Position() != first.Position() {
		t.Fatalf("retry of the first of %d keys within the TTL published again: %s, first was %s", n, again.Position(), first.Position())
	}
}

// Expired keys give their bytes back even in a room that publishes no more keys.
func TestMemorySweepReleasesExpiredKeys(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l := newMemory(t, replay.MemoryConfig{IdempotencyTTL: time.Minute, Now: c.Now})
	ctx := context.Background()
	for i := range 100 {
		m := msg
		m.IdempotencyKey = fmt.Sprintf("key-%d", i)
		if _, err := l.Append(ctx, "r", m); err != nil {
			t.Fatal(err)
		}
	}
	_, before := l.Stats()
	c.Add(2 * time.Minute)
	replay.Sweep(l)
	_, after := l.Stats()
	if after >= before || before-after < 100*64 {
		t.Fatalf("bytes %d before the keys expired, %d after a sweep: want at least 6400 released", before, after)
	}
}

// --max-history-bytes counts each room's record and name, not only events: many
// rooms with one tiny event each run into it.
func TestMemoryByteBudgetCountsRooms(t *testing.T) {
	const budget = 64 << 10
	l := newMemory(t, replay.MemoryConfig{MaxBytes: budget})
	ctx := context.Background()
	tiny := replay.Message{Body: []byte(`1`)}
	name := func(i int) string { return fmt.Sprintf("a-room-with-a-longish-name-%06d", i) }
	accepted := 0
	for i := range 10_000 {
		_, err := l.Append(ctx, name(i), tiny)
		if errors.Is(err, replay.ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted++
	}
	rooms, bytes := l.Stats()
	if rooms != accepted || bytes > budget {
		t.Fatalf("%d rooms, %d bytes; accepted %d, budget %d", rooms, bytes, accepted, budget)
	}
	// Each room holds at least its name, its record (a few hundred bytes of maps and
	// slices) and one event: the budget must see all of it.
	perRoom := budget / accepted
	if perRoom < len(name(0))+replay.RoomOverhead {
		t.Fatalf("%d rooms fit in %d bytes: %d bytes each, less than a room's name and record", accepted, budget, perRoom)
	}
	// A swept room gives its record back.
	replay.Sweep(l) // nothing idle yet
	if r, b := l.Stats(); r != rooms || b != bytes {
		t.Fatalf("sweep of live rooms changed %d/%d to %d/%d", rooms, bytes, r, b)
	}
}

func TestMemorySweptRoomReleasesItsRecord(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l := newMemory(t, replay.MemoryConfig{HistoryTTL: time.Hour, Now: c.Now})
	if _, err := l.Append(context.Background(), "gone", msg); err != nil {
		t.Fatal(err)
	}
	c.Add(2 * time.Hour)
	replay.Sweep(l)
	if rooms, bytes := l.Stats(); rooms != 0 || bytes != 0 {
		t.Fatalf("after the sweep: %d rooms, %d bytes; want none", rooms, bytes)
	}
}

// One room's idempotency keys cannot take the byte budget from the others: 6,000
// keyed publishes of ~250-byte keys to one room, on a 1 MiB budget, all succeed, a
// publish to another room still succeeds, and the flooding room keeps its newest keys
// within its share (MaxBytes/16), having forgotten its oldest first.
func TestMemoryIdempotencyKeysCannotStarveOtherRooms(t *testing.T) {
	const budget = 1 << 20
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l := newMemory(t, replay.MemoryConfig{MaxBytes: budget, Now: c.Now})
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("%0250d", i) }
	const n = 6000
	evs := make([]replay.Event, n)
	for i := range n {
		m := msg
		m.IdempotencyKey = key(i)
		ev, err := l.Append(ctx, "flood", m)
		if err != nil {
			t.Fatalf("keyed publish %d to the flooding room: %v", i, err)
		}
		evs[i] = ev
	}
	if _, err := l.Append(ctx, "other", msg); err != nil {
		t.Fatalf("a publish to another room after the flood: %v", err)
	}
	m := msg
	m.IdempotencyKey = key(0)
	if _, err := l.Append(ctx, "other", m); err != nil {
		t.Fatalf("a keyed publish to another room after the flood: %v", err)
	}

	// The newest keys that fit the room's share are remembered; older ones are not.
	share := budget / 16
	kept := share / (250 + 64)
	for _, i := range []int{n - 1, n - kept} {
		m := msg
		m.IdempotencyKey = key(i)
		again, err := l.Append(ctx, "flood", m)
		if err != nil || again.Position() != evs[i].Position() {
			t.Fatalf("retry of key %d (of the newest %d): %s, %v; want the original %s", i, kept, again.Position(), err, evs[i].Position())
		}
	}
	m.IdempotencyKey = key(n - kept - 1)
	again, err := l.Append(ctx, "flood", m)
	if err != nil || again.Position() == evs[n-kept-1].Position() {
		t.Fatalf("retry of key %d, past the room's share: %s, %v; want a new event", n-kept-1, again.Position(), err)
	}
}
