package rooms

import (
	"testing"

	"github.com/roomcast/roomcast/replay"
)

// TestBellRingsOnOfferAndClose: a member joined with a bell rings it when an item
// reaches its queue and when it is closed, so one reader can wait on many members
// with one channel.
func TestBellRingsOnOfferAndClose(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{}, Config{})
	bell := make(chan struct{}, 1)
	a, err := g.JoinBell(t.Context(), "bell-a", bell)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Leave(a)
	b, err := g.JoinBell(t.Context(), "bell-b", bell)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Leave(b)
	select {
	case <-bell:
		t.Fatal("the bell rang before anything happened")
	default:
	}

	publish(t, l, "bell-b", 1)
	await(t, bell, "the bell after an event of the second room")
	if it := next(t, b); it.Pos.Seq != 1 {
		t.Fatalf("second room's item at %v, want seq 1", it.Pos)
	}

	a.Close(ReasonShed)
	await(t, bell, "the bell after the first member closed")
	if a.Reason() != ReasonShed {
		t.Fatalf("reason %v", a.Reason())
	}

	// A member joined without a bell keeps the plain path.
	c := join(t, g, "bell-a")
	publish(t, l, "bell-a", 1)
	if it := next(t, c); it.Pos.Seq != 1 {
		t.Fatalf("plain member's item at %v", it.Pos)
	}
}
