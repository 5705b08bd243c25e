package rooms

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestObserverSeesFanoutLagAndQueueDepth: one event in 8 of a room fanned out is a
// fan-out lag observation (per event, not per member), and the sampler reports what
// waits in the members' queues.
func TestObserverSeesFanoutLagAndQueueDepth(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{}, Config{Queue: 16, SampleInterval: 5 * time.Millisecond})
	var lags, deepest atomic.Int64
	g.Observe(Observer{
		FanoutLag: func(d time.Duration) {
			if d < 0 {
				t.Errorf("negative lag %s", d)
			}
			lags.Add(1)
		},
		QueueDepth: func(n int) {
			for {
				old := deepest.Load()
				if int64(n) <= old || deepest.CompareAndSwap(old, int64(n)) {
					return
				}
			}
		},
	})
	join(t, g, "o")
	join(t, g, "o")
	publish(t, l, "o", 9)
	// The first and the ninth.
	replaytest.Eventually(t, 10*time.Second, "two fan-out lags", func() bool { return lags.Load() == 2 })
	replaytest.Eventually(t, 10*time.Second, "a queue depth of 9 sampled", func() bool { return deepest.Load() == 9 })
	if n := lags.Load(); n != 2 {
		t.Fatalf("%d fan-out lags for 9 events, want 2", n)
	}
}

// TestGapsRepairedCountsFilledGaps: a repair that delivers missed events from the
// log counts one gap repaired, before the members see them; a repair that resyncs
// counts none.
func TestGapsRepairedCountsFilledGaps(t *testing.T) {
	l, bus, g := setup(t, replay.MemoryConfig{History: 2}, Config{})
	m := join(t, g, "lobby")
	ev := publish(t, l, "lobby", 1)
	expectEvents(t, m, ev.Epoch, 1, 1)

	bus.setIntercept(dropSeqs(2, 2))
	publish(t, l, "lobby", 2)
	expectEvents(t, m, ev.Epoch, 2, 3)
	if st := g.Stats(); st.GapsRepaired != 1 || st.Repairs != 1 {
		t.Fatalf("after a filled gap: %+v", st)
	}

	bus.setIntercept(dropSeqs(4, 6))
	publish(t, l, "lobby", 4)
	it := next(t, m)
	if !it.Resync {
		t.Fatalf("item %+v, want a resync", it)
	}
	if st := g.Stats(); st.GapsRepaired != 1 || st.Resyncs != 1 {
		t.Fatalf("after a gap the log could not fill: %+v", st)
	}
}
