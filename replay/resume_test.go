package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestReadOn(t *testing.T) {
	ctx := context.Background()
	clock := replaytest.NewClock(time.Unix(1731312000, 0))
	l, err := replay.NewMemoryLog(replay.MemoryConfig{History: 3, HistoryTTL: time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	appendN := func(n int) replay.Event {
		var ev replay.Event
		for range n {
			if ev, err = l.Append(ctx, "r", replay.Message{Body: json.RawMessage(`1`)}); err != nil {
				t.Fatal(err)
			}
		}
		return ev
	}
	old := appendN(2)
	clock.Advance(2 * time.Minute)
	cur := appendN(2)
	at := func(epoch string, seq uint64) replay.Position { return replay.Position{Epoch: epoch, Seq: seq} }

	check := func(name string, after replay.Position, wantFrom replay.Position, resync, fork bool, events int) {
		t.Helper()
		rd, err := replay.ReadOn(ctx, l, "r", after, 10)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rd.From != wantFrom || rd.Resync != resync || rd.Fork != fork || len(rd.Events) != events || rd.Head != cur.Position() {
			t.Fatalf("%s: got from %s resync %v fork %v, %d events, head %s; want from %s resync %v fork %v, %d events, head %s",
				name, rd.From, rd.Resync, rd.Fork, len(rd.Events), rd.Head, wantFrom, resync, fork, events, cur.Position())
		}
		if events > 0 && rd.Events[0].Seq != wantFrom.Seq+1 {
			t.Fatalf("%s: first event %s, want seq %d", name, rd.Events[0].ID(), wantFrom.Seq+1)
		}
	}
	check("continues", at(cur.Epoch, 1), at(cur.Epoch, 1), false, false, 1)
	check("old epoch: the new one from its start", old.Position(), at(cur.Epoch, 0), true, false, 2)
	check("ahead in the epoch is a fork", at(cur.Epoch, 9), cur.Position(), true, true, 0)
	check("bare ahead", at("", 9), cur.Position(), true, false, 0)
	cur = appendN(2) // seq 1 of the new epoch is trimmed now
	check("old epoch, new start trimmed: the head", old.Position(), cur.Position(), true, false, 0)
	check("trimmed", at(cur.Epoch, 0), cur.Position(), true, false, 0)
}

// TestRedisSinceBeyondMaxSeq: positions the since function cannot take (15 digits
// and their successor) are answered from the head: a gap, never an error.
func TestRedisSinceBeyondMaxSeq(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	ctx := context.Background()
	l, err := replay.NewRedisLog(ctx, replay.RedisConfig{Addrs: srv.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	room := redistest.Prefix(t)
	ev, err := l.Append(ctx, room, replay.Message{Body: json.RawMessage(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{replay.MaxSeq, replay.MaxSeq + 1, 1<<64 - 1} {
		for _, epoch := range []string{"", ev.Epoch} {
			after := replay.Position{Epoch: epoch, Seq: seq}
			_, head, err := l.Since(ctx, room, after, 10)
			if !errors.Is(err, replay.ErrGap) || head != ev.Position() {
				t.Fatalf("Since(%s) = head %s, %v; want ErrGap at %s", after, head, err, ev.Position())
			}
		}
	}
}

func TestReadMore(t *testing.T) {
	ev := func(epoch string, seq uint64) replay.Event { return replay.Event{Room: "r", Epoch: epoch, Seq: seq} }
	head := replay.Position{Epoch: "e", Seq: 5}
	for _, tc := range []struct {
		name string
		rd   replay.Read
		want bool
	}{
		{"nothing read", replay.Read{Head: head}, false},
		{"cut short of the head", replay.Read{Events: []replay.Event{ev("e", 1), ev("e", 2)}, Head: head}, true},
		{"up to the head", replay.Read{Events: []replay.Event{ev("e", 4), ev("e", 5)}, Head: head}, false},
		{"another epoch than the head", replay.Read{Events: []replay.Event{ev("old", 1)}, Head: head}, false},
	} {
		if got := tc.rd.More(); got != tc.want {
			t.Errorf("%s: More() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
