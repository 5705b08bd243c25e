package replay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestRedisConnectsInTheBackground: a log made while nothing listens at its address
// starts all the same, answers ErrUnavailable at once, and works as soon as a server
// comes up there. Its health follows the server: down, up, down when it goes, up
// when it is back.
func TestRedisConnectsInTheBackground(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	port := redistest.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx := context.Background()
	l, err := replay.NewRedisLog(ctx, replay.RedisConfig{
		Addrs: []string{addr}, Timeout: 300 * time.Millisecond, HealthInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("new log with nothing listening: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	room := redistest.Prefix(t) + ".late"
	if h := l.Health(); h.Up || h.Kind != "redis" || h.ChangedAt.IsZero() {
		t.Fatalf("health before any server: %+v", h)
	}
	start := time.Now()
	checks := map[string]func() error{
		"append":    func() error { _, err := l.Append(ctx, room, msgN(1)); return err },
		"batch":     func() error { _, errs := l.AppendBatch(ctx, []string{room}, []replay.Message{msgN(1)}); return errs[0] },
		"since":     func() error { _, _, err := l.Since(ctx, room, replay.Position{}, 10); return err },
		"head":      func() error { _, err := l.Head(ctx, room); return err },
		"subscribe": func() error { return l.Subscribe(ctx, room, func(replay.Event) {}) },
		"ping":      func() error { return l.Ping(ctx) },
	}
	for name, call := range checks {
		if err := call(); !errors.Is(err, replay.ErrUnavailable) || errors.Is(err, replay.ErrOutcomeUnknown) {
			t.Errorf("%s before any server: %v, want ErrUnavailable", name, err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the calls took %s with nothing to connect to", d)
	}

	s := redistest.StandaloneAt(t, port)
	replaytest.Eventually(t, 10*time.Second, "the condition", func() error {
		if h := l.Health(); !h.Up {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	rec := subscribeRec(t, l, room)
	ev := mustAppend(t, l, room, msgN(1))
	if got := rec.next(t, 5*time.Second); got.Seq != ev.Seq || ev.Seq != 1 {
		t.Fatalf("ring %+v for %+v", got, ev)
	}

	wentUp := l.Health().ChangedAt
	_, _ = s.Do("SHUTDOWN", "NOSAVE")
	replaytest.Eventually(t, 10*time.Second, "the condition", func() error {
		if h := l.Health(); h.Up || !h.ChangedAt.After(wentUp) {
			return fmt.Errorf("health %+v after the server stopped", h)
		}
		return nil
	})
	redistest.StandaloneAt(t, port)
	replaytest.Eventually(t, 10*time.Second, "the condition", func() error {
		if h := l.Health(); !h.Up {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	// The new server knew nothing of the library: the log loads it again. (A call
	// on a connection to the old server still reads EOF, unknown: publish with a key,
	// as a client that was told so would.)
	m := msgN(2)
	m.IdempotencyKey = "after-restart"
	var again replay.Event
	replaytest.Eventually(t, 10*time.Second, "the condition", func() error {
		var err error
		again, err = l.Append(ctx, room, m)
		return err
	})
	if again.Seq != 1 {
		t.Fatalf("append on the new server: %+v, want seq 1 of a new history", again)
	}
}
