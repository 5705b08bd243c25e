package rooms

import (
	"context"
	"errors"
	"testing"

	"github.com/roomcast/roomcast/replay"
)

func countReasons(ms []*Member) map[Reason]int {
	n := make(map[Reason]int)
	for _, m := range ms {
		n[m.Reason()]++
	}
	return n
}

func TestShed(t *testing.T) {
	_, _, g := setup(t, replay.MemoryConfig{}, Config{})
	var ms []*Member
	for i := range 4 {
		for range 5 {
			ms = append(ms, join(t, g, roomName("room", i)))
		}
	}
	steps := []struct {
		name       string
		n          int
		wantClosed int
		wantShed   int // members closed with ReasonShed after the step
	}{
		{name: "zero", n: 0, wantClosed: 0, wantShed: 0},
		{name: "three", n: 3, wantClosed: 3, wantShed: 3},
		{name: "seven more, skipping those already closed", n: 7, wantClosed: 7, wantShed: 10},
		{name: "more than are open", n: 100, wantClosed: 10, wantShed: 20},
		{name: "none left", n: 5, wantClosed: 0, wantShed: 20},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if got := g.Shed(st.n); got != st.wantClosed {
				t.Fatalf("Shed(%d) = %d, want %d", st.n, got, st.wantClosed)
			}
			reasons := countReasons(ms)
			if reasons[ReasonShed] != st.wantShed || reasons[0] != len(ms)-st.wantShed {
				t.Fatalf("reasons %v, want %d shed and the rest open", reasons, st.wantShed)
			}
		})
	}
}

func TestCloseAll(t *testing.T) {
	t.Run("returns once every member has left", func(t *testing.T) {
		_, _, g := setup(t, replay.MemoryConfig{}, Config{})
		var ms []*Member
		left := make(chan struct{}, 30)
		for i := range 3 {
			for range 10 {
				m := join(t, g, roomName("room", i))
				ms = append(ms, m)
				go func() { // the stream: it leaves when told to end
					<-m.Done()
					g.Leave(m)
					left <- struct{}{}
				}()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := g.CloseAll(ctx); err != nil {
			t.Fatalf("CloseAll: %v", err)
		}
		if n := g.Len(); n != 0 {
			t.Fatalf("Len = %d after CloseAll, want 0", n)
		}
		if reasons := countReasons(ms); reasons[ReasonShed] != len(ms) {
			t.Fatalf("reasons %v, want all %d shed", reasons, len(ms))
		}
		for range ms {
			await(t, left, "streams to leave")
		}
	})

	t.Run("expired ctx with members not leaving", func(t *testing.T) {
		_, _, g := setup(t, replay.MemoryConfig{}, Config{})
		ms := []*Member{join(t, g, "a"), join(t, g, "b")}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := g.CloseAll(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("CloseAll: err %v, want %v", err, context.Canceled)
		}
		if st := g.Stats(); st.Members != 2 || g.Len() != 0 {
			t.Fatalf("members %d, open %d; want the 2 closed members that did not leave yet", st.Members, g.Len())
		}
		for _, m := range ms {
			if m.Reason() != ReasonShed {
				t.Fatalf("member closed with %s, want %s", m.Reason(), ReasonShed)
			}
			g.Leave(m)
		}
	})
}
