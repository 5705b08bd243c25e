package replay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestRedisOutcomeUnknown: a publish handed to Redis whose answer did not come back
// in time may run all the same: it is ErrOutcomeUnknown, not a plain "not
// published". One that surely did not reach Redis is ErrUnavailable alone.
func TestRedisOutcomeUnknown(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t) // its own server: the test pauses and stops it
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{Timeout: 300 * time.Millisecond})
	ctx := context.Background()
	room := redistest.Prefix(t) + ".unknown"
	first := mustAppend(t, l, room, msgN(1))
	keyed := msgN(4)
	keyed.IdempotencyKey = "k-unknown"

	// Writes wait while the server is paused.
	s.MustDo(t, "CLIENT", "PAUSE", "2000", "WRITE")
	paused := time.Now()
	if _, err := l.Append(ctx, room, msgN(2)); !errors.Is(err, replay.ErrOutcomeUnknown) || !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("append while writes are paused: %v, want ErrOutcomeUnknown", err)
	}
	if _, errs := l.AppendBatch(ctx, []string{room + ".batch"}, []replay.Message{msgN(1)}); !errors.Is(errs[0], replay.ErrOutcomeUnknown) {
		t.Fatalf("batch append while writes are paused: %v, want ErrOutcomeUnknown", errs[0])
	}
	if _, err := l.Append(ctx, room, keyed); !errors.Is(err, replay.ErrOutcomeUnknown) {
		t.Fatalf("keyed append while writes are paused: %v, want ErrOutcomeUnknown", err)
	}
	if time.Since(paused) > 1800*time.Millisecond {
		t.Fatal("the appends outlasted the pause; the test proves nothing")
	}

	// A retry with the key after the pause publishes at most once. (Whether a paused
	// call ran cannot be told here: rueidis drops a connection whose call timed out,
	// and Redis discards a paused client's command when it disconnects; a reply lost
	// after the command ran looks the same to the caller.)
	var again replay.Event
	eventually(t, 10*time.Second, func() error {
		var err error
		again, err = l.Append(ctx, room, keyed)
		return err
	})
	if dup := mustAppend(t, l, room, keyed); dup.Seq != again.Seq {
		t.Fatalf("retries with one key: seq %d then %d", again.Seq, dup.Seq)
	}
	evs, _, err := l.Since(ctx, room, first.Position(), 10)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Seq != again.Seq {
		t.Fatalf("log after the retries: %+v %v, want it to end at seq %d", evs, err, again.Seq)
	}
	for _, ev := range evs {
		if string(ev.Body) == `{"n":4}` && ev.Seq != again.Seq {
			t.Fatalf("the keyed event twice in the log: %+v", evs)
		}
	}

	// A server that is gone never receives the publish: unavailable, not unknown.
	// The first calls on each of the client's connections write to a socket the
	// server has closed and read EOF, which is all a client ever sees of a server
	// that took a command and died: unknown. Once the connections are found dead,
	// every publish fails to dial: surely not run.
	_, _ = s.Do("SHUTDOWN", "NOSAVE")
	for i := 0; ; i++ {
		_, err := l.Append(ctx, room, msgN(3))
		if !errors.Is(err, replay.ErrUnavailable) {
			t.Fatalf("append to a stopped server: %v, want ErrUnavailable", err)
		}
		if !errors.Is(err, replay.ErrOutcomeUnknown) {
			if !strings.Contains(err.Error(), "refused") {
				t.Fatalf("append to a stopped server: %v, want a refused dial", err)
			}
			break
		}
		if i == 20 {
			t.Fatalf("append to a stopped server: still %v after %d calls", err, i)
		}
	}
	_, errs := l.AppendBatch(ctx, []string{room}, []replay.Message{msgN(3)})
	if !errors.Is(errs[0], replay.ErrUnavailable) || errors.Is(errs[0], replay.ErrOutcomeUnknown) {
		t.Fatalf("batch append to a stopped server: %v, want ErrUnavailable only", errs[0])
	}
}
