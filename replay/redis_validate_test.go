package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// What comes back from Redis is input: a doorbell or a log entry that another client
// with write rights forged, or that a bug wrote, must never reach a reader as an event.

// forgedDoorbells are malformed or forged doorbells for the room's next seq (2) in
// epoch.
func forgedDoorbells(epoch string) map[string]string {
	return map[string]string{
		"body not JSON":    epoch + " 2 1700000000000 t\n{\"a\":",
		"raw newline":      epoch + " 2 1700000000000 t\n{\"a\":\"b\nc\"}",
		"reserved type":    epoch + " 2 1700000000000 resync\n{}",
		"reserved type EO": epoch + " 2 1700000000000 error\n{}",
		"bad epoch":        "bad{epoch} 2 1700000000000 t\n{}",
		"seq zero":         epoch + " 0 1700000000000 t\n{}",
		"seq 16 digits":    epoch + " 1000000000000000 1700000000000 t\n{}",
		"ts zero":          epoch + " 2 0 t\n{}",
		"no body":          epoch + " 2 1700000000000 t",
	}
}

func TestRedisForgedDoorbellsRingZero(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	room := redistest.Prefix(t) + ".forged"
	rec := subscribeRec(t, l, room)
	first := mustAppend(t, l, room, msgN(1))
	if ev := rec.next(t, 5*time.Second); ev.Seq != 1 {
		t.Fatalf("ring %+v", ev)
	}
	forged := forgedDoorbells(first.Epoch)
	before := l.Stats().BadMessages
	for name, msg := range forged {
		s.MustDo(t, "SPUBLISH", "room:{"+room+"}", msg)
		// Every forged doorbell rings a zero Event ("read the log"), nothing else.
		select {
		case ev := <-rec.ch:
			if ev.Seq != 0 {
				t.Fatalf("%s: rang %+v, want a zero Event", name, ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no ring", name)
		}
	}
	if got := l.Stats().BadMessages - before; got != uint64(len(forged)) {
		t.Fatalf("%d bad messages counted, want %d", got, len(forged))
	}
	// The real next event still rings as itself.
	mustAppend(t, l, room, msgN(2))
	if ev := rec.next(t, 5*time.Second); ev.Seq != 2 || string(ev.Body) != `{"n":2}` {
		t.Fatalf("ring after the forged ones: %+v", ev)
	}
}

func TestRedisBadLogEntryIsLostHistory(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctx := context.Background()
	for name, fields := range map[string][]string{
		"reserved type":  {"epoch", "", "ts", "1700000000000", "type", "resync", "body", "{}"},
		"body not JSON":  {"epoch", "", "ts", "1700000000000", "type", "", "body", "{\"a\":"},
		"raw newline":    {"epoch", "", "ts", "1700000000000", "type", "", "body", "[1,\n2]"},
		"no body":        {"epoch", "", "ts", "1700000000000", "type", ""},
		"ts zero":        {"epoch", "", "ts", "0", "type", "", "body", "{}"},
		"another epoch":  {"epoch", "forged", "ts", "1700000000000", "type", "", "body", "{}"},
		"bad type chars": {"epoch", "", "ts", "1700000000000", "type", "a b", "body", "{}"},
	} {
		t.Run(name, func(t *testing.T) {
			room := redistest.Prefix(t) + ".entry"
			first := mustAppend(t, l, room, msgN(1))
			// Someone with write rights appends entry 2 by hand and moves the head.
			for i := range fields {
				if fields[i] == "epoch" && fields[i+1] == "" {
					fields[i+1] = first.Epoch
				}
			}
			s.MustDo(t, append([]string{"XADD", "room:{" + room + "}:log", "2-0"}, fields...)...)
			s.MustDo(t, "HSET", "room:{"+room+"}:seq", "seq", "2")
			before := l.Stats().BadEntries
			evs, head, err := l.Since(ctx, room, replay.Position{}, 10)
			if !errors.Is(err, replay.ErrGap) || len(evs) != 0 {
				t.Fatalf("since over a bad entry: %+v, %v; want ErrGap", evs, err)
			}
			if want := (replay.Position{Epoch: first.Epoch, Seq: 2}); head != want {
				t.Fatalf("head %v, want %v", head, want)
			}
			if l.Stats().BadEntries == before {
				t.Fatal("bad entry not counted")
			}
			// Reading from after the bad entry works: the history is usable again.
			next := mustAppend(t, l, room, msgN(3))
			evs, _, err = l.Since(ctx, room, head, 10)
			if err != nil || len(evs) != 1 || evs[0].Seq != next.Seq {
				t.Fatalf("since after the bad entry: %+v, %v", evs, err)
			}
		})
	}
}

func TestRedisBadHeadIsUnavailable(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctx := context.Background()
	for name, field := range map[string][2]string{
		"epoch with a quote": {"epoch", `ep"1`},
		"epoch with newline": {"epoch", "ep\n1"},
		"negative seq":       {"seq", "-5"},
		"seq 16 digits":      {"seq", "1000000000000000"},
	} {
		t.Run(name, func(t *testing.T) {
			room := redistest.Prefix(t) + ".head"
			mustAppend(t, l, room, msgN(1))
			s.MustDo(t, "HSET", "room:{"+room+"}:seq", field[0], field[1])
			before := l.Stats().BadEntries
			if h, err := l.Head(ctx, room); !errors.Is(err, replay.ErrUnavailable) {
				t.Fatalf("head %v, %v; want ErrUnavailable", h, err)
			}
			for _, after := range []replay.Position{{}, {Seq: 1}, {Seq: 7}} {
				if evs, h, err := l.Since(ctx, room, after, 10); !errors.Is(err, replay.ErrUnavailable) {
					t.Fatalf("since %v: %+v, head %v, %v; want ErrUnavailable", after, evs, h, err)
				}
			}
			if l.Stats().BadEntries == before {
				t.Fatal("bad head not counted")
			}
			// A publish over it either starts a new history (the function replaces
			// a head it cannot continue) or fails as unknown: it ran, but its answer
			// names no position a reader could use.
			ev, err := l.Append(ctx, room, msgN(2))
			if err != nil && !errors.Is(err, replay.ErrOutcomeUnknown) {
				t.Fatalf("append over a bad head: %v, want success or ErrOutcomeUnknown", err)
			}
			if err == nil {
				if _, perr := replay.ParsePosition(ev.ID()); perr != nil || ev.Seq > replay.MaxSeq || ev.TS <= 0 {
					t.Fatalf("append over a bad head answered %+v", ev)
				}
			}
		})
	}
}
