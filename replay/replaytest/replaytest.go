// Package replaytest is the contract every replay.Log implementation passes: one
// suite, run against each backend from a constructor. It also holds the repository's
// one Clock and one SyncBuffer, and Eventually, which forwards to replay/polltest
// (the one poll loop, below replay/redistest), here so that the tests of replay,
// rooms and everything above may import them (imports point down only).
package replaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// Factory returns a fresh, empty Log that keeps history events per room. The suite
// closes it.
type Factory func(t *testing.T, history int) replay.Log

var roomSeq atomic.Int64

// room returns a room name no other test uses, so that backends may share state.
func room(t *testing.T) string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e9, roomSeq.Add(1))
}

func body(i int) replay.Message {
	return replay.Message{Body: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}
}

// Run runs the contract suite.
func Run(t *testing.T, newLog Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newLog Factory)
	}{
		{"AppendIsDense", appendIsDense},
		{"AppendConcurrent", appendConcurrent},
		{"AppendValidates", appendValidates},
		{"SinceFromStart", sinceFromStart},
		{"SinceBareSeq", sinceBareSeq},
		{"SinceLimit", sinceLimit},
		{"SinceGaps", sinceGaps},
		{"SinceUnknownRoom", sinceUnknownRoom},
		{"Head", head},
		{"Idempotency", idempotency},
		{"Deadlines", deadlines},
		{"RingsInOrder", ringsInOrder},
		{"Unsubscribe", unsubscribe},
		{"Closed", closed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLog) })
	}
}

func open(t *testing.T, newLog Factory, history int) replay.Log {
	t.Helper()
	l := newLog(t, history)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func mustAppend(t *testing.T, l replay.Log, r string, n int) []replay.Event {
	t.Helper()
	out := make([]replay.Event, 0, n)
	for i := 1; i <= n; i++ {
		ev, err := l.Append(context.Background(), r, body(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, ev)
	}
	return out
}

func appendIsDense(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 100), room(t)
	evs := mustAppend(t, l, r, 50)
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || ev.Epoch != evs[0].Epoch || ev.Room != r {
			t.Fatalf("event %d = %+v, want seq %d in epoch %q of %q", i, ev, i+1, evs[0].Epoch, r)
		}
		if ev.ID() != ev.Epoch+":"+strconv.Itoa(i+1) {
			t.Fatalf("id %q", ev.ID())
		}
		if ev.TS <= 0 {
			t.Fatalf("ts %d", ev.TS)
		}
	}
	if evs[0].Epoch == "" {
		t.Fatal("empty epoch")
	}
}

func appendConcurrent(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 1000), room(t)
	const writers, each = 8, 50
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				ev, err := l.Append(context.Background(), r, body(i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[ev.Seq] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for s := uint64(1); s <= writers*each; s++ {
		if !seen[s] {
			t.Fatalf("seq %d never assigned; %d distinct seqs", s, len(seen))
		}
	}
}

func appendValidates(t *testing.T, newLog Factory) {
	l := open(t, newLog, 10)
	cases := []struct {
		name string
		room string
		msg  replay.Message
	}{
		{"brace in room", "a{b}", body(1)},
		{"empty room", "", body(1)},
		{"reserved type", room(t), replay.Message{Type: "resync", Body: json.RawMessage(`1`)}},
		{"bad type", room(t), replay.Message{Type: "a b", Body: json.RawMessage(`1`)}},
		{"empty body", room(t), replay.Message{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := l.Append(context.Background(), tc.room, tc.msg); !errors.Is(err, replay.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func sinceFromStart(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 100), room(t)
	evs := mustAppend(t, l, r, 20)
	got, head, err := l.Since(context.Background(), r, replay.Position{Epoch: evs[0].Epoch}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 || got[0].Seq != 1 || got[19].Seq != 20 {
		t.Fatalf("got %d events", len(got))
	}
	if head != evs[19].Position() {
		t.Fatalf("head %v, want %v", head, evs[19].Position())
	}
	if string(got[4].Body) != `{"i":5}` {
		t.Fatalf("body %s", got[4].Body)
	}
	got, _, err = l.Since(context.Background(), r, evs[14].Position(), 100)
	if err != nil || len(got) != 5 || got[0].Seq != 16 {
		t.Fatalf("after 15: %d events, err %v", len(got), err)
	}
	got, _, err = l.Since(context.Background(), r, evs[19].Position(), 100)
	if err != nil || len(got) != 0 {
		t.Fatalf("at head: %d events, err %v", len(got), err)
	}
}

func sinceBareSeq(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 100), room(t)
	evs := mustAppend(t, l, r, 10)
	got, head, err := l.Since(context.Background(), r, replay.Position{Seq: 7}, 100)
	if err != nil || len(got) != 3 || got[0].Seq != 8 || head.Epoch != evs[0].Epoch {
		t.Fatalf("bare 7: %d events, head %v, err %v", len(got), head, err)
	}
}

func sinceLimit(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 100), room(t)
	evs := mustAppend(t, l, r, 30)
	got, head, err := l.Since(context.Background(), r, replay.Position{Epoch: evs[0].Epoch, Seq: 3}, 10)
	if err != nil || len(got) != 10 || got[0].Seq != 4 || got[9].Seq != 13 || head.Seq != 30 {
		t.Fatalf("limit 10: %d events, head %v, err %v", len(got), head, err)
	}
}

func sinceGaps(t *testing.T, newLog Factory) {
	const history = 10
	l, r := open(t, newLog, history), room(t)
	evs := mustAppend(t, l, r, 20*history)
	ep, top := evs[0].Epoch, uint64(20*history)
	cases := []struct {
		name  string
		after replay.Position
		gap   bool
	}{
		{"newest retained", replay.Position{Epoch: ep, Seq: top - history}, false},
		{"long trimmed", replay.Position{Epoch: ep, Seq: 1}, true},
		{"start of epoch", replay.Position{Epoch: ep}, true},
		{"other epoch", replay.Position{Epoch: "zzzzzzzz", Seq: top}, true},
		{"ahead of head", replay.Position{Epoch: ep, Seq: top + 1}, true},
		{"bare ahead", replay.Position{Seq: top + 5}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, head, err := l.Since(context.Background(), r, tc.after, 100)
			if head != evs[len(evs)-1].Position() {
				t.Fatalf("head %v, want %v", head, evs[len(evs)-1].Position())
			}
			if tc.gap != errors.Is(err, replay.ErrGap) {
				t.Fatalf("err = %v, want gap %v", err, tc.gap)
			}
			if !tc.gap && uint64(len(got)) != top-tc.after.Seq {
				t.Fatalf("%d events", len(got))
			}
		})
	}
}

func sinceUnknownRoom(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 10), room(t)
	got, head, err := l.Since(context.Background(), r, replay.Position{}, 10)
	if err != nil || len(got) != 0 || head != (replay.Position{}) {
		t.Fatalf("zero: %v %v %v", got, head, err)
	}
	if _, _, err := l.Since(context.Background(), r, replay.Position{Epoch: "abc", Seq: 3}, 10); !errors.Is(err, replay.ErrGap) {
		t.Fatalf("old id on an empty room: %v, want ErrGap", err)
	}
}

func head(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 10), room(t)
	if h, err := l.Head(context.Background(), r); err != nil || h != (replay.Position{}) {
		t.Fatalf("empty head %v %v", h, err)
	}
	evs := mustAppend(t, l, r, 25)
	if h, err := l.Head(context.Background(), r); err != nil || h != evs[24].Position() {
		t.Fatalf("head %v %v", h, err)
	}
}

func idempotency(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 10), room(t)
	msg := body(1)
	msg.IdempotencyKey = "order-42"
	first, err := l.Append(context.Background(), r, msg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.Append(context.Background(), r, msg)
	if err != nil || again.Seq != first.Seq || again.Epoch != first.Epoch {
		t.Fatalf("retry: %+v %v, want seq %d", again, err, first.Seq)
	}
	msg.IdempotencyKey = "order-43"
	other, err := l.Append(context.Background(), r, msg)
	if err != nil || other.Seq != first.Seq+1 {
		t.Fatalf("other key: %+v %v", other, err)
	}
	got, _, _ := l.Since(context.Background(), r, replay.Position{Epoch: first.Epoch}, 10)
	if len(got) != 2 {
		t.Fatalf("log holds %d events, want 2", len(got))
	}
}

func subscribe(t *testing.T, l replay.Log, r string) <-chan replay.Event {
	t.Helper()
	ch := make(chan replay.Event, 1024)
	if err := l.Subscribe(context.Background(), r, func(ev replay.Event) {
		select {
		case ch <- ev:
		default:
			t.Error("ring channel full")
		}
	}); err != nil {
		t.Fatal(err)
	}
	return ch
}

func next(t *testing.T, ch <-chan replay.Event) replay.Event {
	t.Helper()
	for {
		select {
		case ev := <-ch:
			if ev.Seq == 0 { // "read the log" hint: not an event
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no ring within 10s")
		}
	}
}

func ringsInOrder(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 100), room(t)
	ch := subscribe(t, l, r)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() { mustAppend(t, l, r, 25) })
	}
	wg.Wait()
	for s := uint64(1); s <= 100; s++ {
		if ev := next(t, ch); ev.Seq != s || len(ev.Body) == 0 {
			t.Fatalf("ring %d: seq %d body %q", s, ev.Seq, ev.Body)
		}
	}
}

func unsubscribe(t *testing.T, newLog Factory) {
	l, a, b := open(t, newLog, 10), room(t), room(t)
	chA := subscribe(t, l, a)
	mustAppend(t, l, a, 1)
	next(t, chA)
	if err := l.Unsubscribe(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	chB := subscribe(t, l, b)
	mustAppend(t, l, a, 1)
	mustAppend(t, l, b, 1)
	next(t, chB)
	select {
	case ev := <-chA:
		if ev.Seq != 0 {
			t.Fatalf("ring after unsubscribe: %+v", ev)
		}
	default:
	}
}

func closed(t *testing.T, newLog Factory) {
	l := newLog(t, 10)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), room(t), body(1)); !errors.Is(err, replay.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, _, err := l.Since(context.Background(), room(t), replay.Position{}, 1); !errors.Is(err, replay.ErrClosed) {
		t.Fatalf("since after close: %v", err)
	}
}
