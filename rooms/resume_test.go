package rooms

import (
	"testing"

	"github.com/roomcast/roomcast/replay"
)

// TestResyncMarksForks: a repair that finds another event at the last delivered
// position marks its resync as a fork; a resync over a trimmed gap is not one.
func TestResyncMarksForks(t *testing.T) {
	l, bus, g := setup(t, replay.MemoryConfig{History: 5}, Config{})
	m := join(t, g, "lobby")
	ev := publish(t, l, "lobby", 3)
	expectEvents(t, m, ev.Epoch, 1, 3)

	bus.setIntercept(func(replay.Event) []replay.Event { return nil })
	bus.ring("lobby", replay.Event{Room: "lobby", Epoch: ev.Epoch, Seq: 4, TS: 1, Body: []byte(`"lost"`)})
	expectEvents(t, m, ev.Epoch, 4, 4)
	real := publish(t, l, "lobby", 1)
	bus.setIntercept(nil)
	bus.ring("lobby", replay.Event{})
	if it := next(t, m); !it.Resync || !it.Fork || it.Pos != real.Position() {
		t.Fatalf("got item {pos %s resync %v fork %v}, want a fork resync at %s", it.Pos, it.Resync, it.Fork, real.Position())
	}

	bus.setIntercept(func(replay.Event) []replay.Event { return nil })
	publish(t, l, "lobby", 10)
	bus.setIntercept(nil)
	head := publish(t, l, "lobby", 1)
	if it := next(t, m); !it.Resync || it.Fork || it.Pos != head.Position() {
		t.Fatalf("got item {pos %s resync %v fork %v}, want a plain resync at %s", it.Pos, it.Resync, it.Fork, head.Position())
	}
}

// TestJoinDuringRepairStarts: a member that joins while its room is repairing starts
// at the position the room has delivered, and receives every event after it.
func TestJoinDuringRepairStarts(t *testing.T) {
	l := newMemoryLog(t, replay.MemoryConfig{})
	bus := newFakeBus(l)
	sl := &steeredLog{MemoryLog: l, entered: make(chan struct{}, 1)}
	g := newRegistry(t, bus, sl, Config{})
	a := join(t, g, "lobby")
	if a.Start() != (replay.Position{}) {
		t.Fatalf("first member of an empty room starts at %s, want 0", a.Start())
	}
	ev := publish(t, l, "lobby", 2)
	expectEvents(t, a, ev.Epoch, 1, 2)

	bus.setIntercept(dropSeqs(3, 4))
	release := make(chan struct{})
	sl.mu.Lock()
	sl.gate = release
	sl.mu.Unlock()
	publish(t, l, "lobby", 3) // ring 5 shows the gap; the repair reads 3..5 and waits
	await(t, sl.entered, "the repair read")
	b := join(t, g, "lobby")
	if want := (replay.Position{Epoch: ev.Epoch, Seq: 2}); b.Start() != want {
		t.Fatalf("member joined during the repair starts at %s, want %s", b.Start(), want)
	}
	close(release)
	for _, m := range []*Member{a, b} {
		expectEvents(t, m, ev.Epoch, 3, 5)
	}
	publish(t, l, "lobby", 1)
	for _, m := range []*Member{a, b} {
		expectEvents(t, m, ev.Epoch, 6, 6)
		expectEmpty(t, m)
	}
}
