package replay_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestMemoryControl(t *testing.T) {
	runControl(t, func(t *testing.T) controlEnv {
		clock := replaytest.NewClock(time.Now())
		l, err := replay.NewMemoryLog(replay.MemoryConfig{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		c := accessControl(t, l)
		return controlEnv{a: c, b: c, now: clock.Now, pass: func(_ *testing.T, d time.Duration) { clock.Advance(d) }}
	})
}

// TestMemoryControlBounds: 100 000 live tickets at most, expired ones pruned to make
// room; 100 000 revocations at most, the one that ends first evicted first.
func TestMemoryControlBounds(t *testing.T) {
	ctx := context.Background()
	clock := replaytest.NewClock(time.Now())
	l, err := replay.NewMemoryLog(replay.MemoryConfig{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	c := accessControl(t, l)
	const bound = 100000
	for i := range bound {
		if err := c.PutTicket(ctx, "t"+strconv.Itoa(i), nil, time.Minute); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if err := c.PutTicket(ctx, "one-more", nil, time.Minute); !errors.Is(err, replay.ErrFull) {
		t.Fatalf("put beyond the bound: %v, want ErrFull", err)
	}
	if _, err := c.TakeTicket(ctx, "t0"); err != nil {
		t.Fatalf("take: %v", err)
	}
	if err := c.PutTicket(ctx, "one-more", nil, time.Minute); err != nil {
		t.Fatalf("put after a take made room: %v", err)
	}
	clock.Advance(2 * time.Minute)
	if err := c.PutTicket(ctx, "after-expiry", nil, time.Minute); err != nil {
		t.Fatalf("put once the others expired: %v", err)
	}

	now := clock.Now().Truncate(time.Millisecond)
	for i := range bound + 1 {
		// The first one ends first; every later one an hour after it.
		until := now.Add(time.Hour + time.Duration(min(i, 1))*time.Hour)
		r := replay.Revocation{Kind: "jti", Value: "r" + strconv.Itoa(i), At: now, Until: until}
		if err := c.Revoke(ctx, r); err != nil {
			t.Fatalf("revoke %d: %v", i, err)
		}
	}
	seen := map[string]bool{}
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	c.WatchRevocations(ctx2, func(r replay.Revocation) { seen[r.Value] = true })
	if len(seen) != bound || seen["r0"] || !seen["r1"] || !seen["r"+strconv.Itoa(bound)] {
		t.Fatalf("%d revocations in force (r0 %v), want %d without r0, the one that ended first", len(seen), seen["r0"], bound)
	}
}
