package rooms

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestObserverSeesFanoutLagAndQueueDepth: every event fanned out is one fan-out lag
// observation (per event, not per member), and the sampler reports what waits in
// the members' queues.
func TestObserverSeesFanoutLagAndQueueDepth(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{}, Config{SampleInterval: 5 * time.Millisecond})
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
	publish(t, l, "o", 3)
	replaytest.Eventually(t, 10*time.Second, "three fan-out lags", func() bool { return lags.Load() == 3 })
	replaytest.Eventually(t, 10*time.Second, "a queue depth of 3 sampled", func() bool { return deepest.Load() == 3 })
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
