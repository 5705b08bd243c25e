package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(redistest.LeakOptions(),
		goleak.Cleanup(func(code int) { redistest.Teardown(); os.Exit(code) }))...)
}

func TestMemoryLogContract(t *testing.T) {
	replaytest.Run(t, func(t *testing.T, history int) replay.Log {
		l, err := replay.NewMemoryLog(replay.MemoryConfig{History: history})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newMemory(t *testing.T, cfg replay.MemoryConfig) *replay.MemoryLog {
	t.Helper()
	l, err := replay.NewMemoryLog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

var msg = replay.Message{Body: json.RawMessage(`{"x":1}`)}

func TestMemoryIdleRoomStartsNewEpoch(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l := newMemory(t, replay.MemoryConfig{HistoryTTL: time.Hour, Now: c.Now})
	ctx := context.Background()
	first, _ := l.Append(ctx, "r", msg)
	c.Add(30 * time.Minute)
	second, _ := l.Append(ctx, "r", msg)
	if second.Epoch != first.Epoch || second.Seq != 2 {
		t.Fatalf("within the TTL: %+v after %+v", second, first)
	}
	c.Add(61 * time.Minute)
	if _, _, err := l.Since(ctx, "r", second.Position(), 10); !errors.Is(err, replay.ErrGap) {
		t.Fatalf("an expired history must not resume: %v", err)
	}
	third, _ := l.Append(ctx, "r", msg)
	if third.Epoch == first.Epoch || third.Seq != 1 {
		t.Fatalf("after the TTL: %+v, want seq 1 in a new epoch", third)
	}
}

func TestMemorySweepForgetsIdleRooms(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l := newMemory(t, replay.MemoryConfig{HistoryTTL: time.Hour, Now: c.Now})
	for _, r := range []string{"a", "b", "c"} {
		if _, err := l.Append(context.Background(), r, msg); err != nil {
			t.Fatal(err)
		}
	}
	c.Add(2 * time.Hour)
	if _, err := l.Append(context.Background(), "c", msg); err != nil {
		t.Fatal(err)
	}
	replay.Sweep(l)
	rooms, bytes := l.Stats()
	if rooms != 1 || bytes <= 0 {
		t.Fatalf("after sweep: %d rooms, %d bytes; want 1 room", rooms, bytes)
	}
}

func TestMemoryMaxRooms(t *testing.T) {
	l := newMemory(t, replay.MemoryConfig{MaxRooms: 3})
	ctx := context.Background()
	for _, r := range []string{"a", "b", "c"} {
		if _, err := l.Append(ctx, r, msg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(ctx, "d", msg); !errors.Is(err, replay.ErrFull) {
		t.Fatalf("fourth room: %v, want ErrFull", err)
	}
	if _, err := l.Append(ctx, "a", msg); err != nil {
		t.Fatalf("existing room must keep working: %v", err)
	}
}

func TestMemoryByteBudget(t *testing.T) {
	big := replay.Message{Body: json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)}
	l := newMemory(t, replay.MemoryConfig{MaxBytes: 20_000, History: 1000})
	ctx := context.Background()
	// One room fills the budget, then keeps publishing by shedding its own oldest.
	var last replay.Event
	for i := 0; i < 100; i++ {
		ev, err := l.Append(ctx, "a", big)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		last = ev
	}
	_, used := l.Stats()
	if used > 20_000 {
		t.Fatalf("%d bytes held, budget 20000", used)
	}
	evs, _, err := l.Since(ctx, "a", replay.Position{Epoch: last.Epoch, Seq: 95}, 10)
	if err != nil || len(evs) != 5 {
		t.Fatalf("recent history: %d events, %v", len(evs), err)
	}
	if _, _, err := l.Since(ctx, "a", replay.Position{Epoch: last.Epoch, Seq: 1}, 10); !errors.Is(err, replay.ErrGap) {
		t.Fatalf("shed history must report a gap: %v", err)
	}
	// Another room cannot take memory it does not hold: with nothing of its own to
	// shed it is refused rather than growing past the budget.
	if _, err := l.Append(ctx, "b", big); !errors.Is(err, replay.ErrFull) {
		t.Fatalf("second room over budget: %v, want ErrFull", err)
	}
}

func TestMemoryIdempotencyExpires(t *testing.T) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	l := newMemory(t, replay.MemoryConfig{IdempotencyTTL: time.Minute, MaxIdempotencyKeys: 2, Now: c.Now})
	ctx := context.Background()
	keyed := func(k string) replay.Event {
		m := msg
		m.IdempotencyKey = k
		ev, err := l.Append(ctx, "r", m)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	a := keyed("a")
	if keyed("a").Seq != a.Seq {
		t.Fatal("retry inside the TTL published again")
	}
	c.Add(2 * time.Minute)
	if keyed("a").Seq == a.Seq {
		t.Fatal("key remembered past its TTL")
	}
	keyed("b")
	keyed("c") // evicts the oldest key beyond MaxIdempotencyKeys
	b2 := keyed("b")
	if keyed("b").Seq != b2.Seq {
		t.Fatal("newest key forgotten")
	}
}
