// The race detector drops a quarter of what goes into a sync.Pool, so allocation
// counts are exact only without it: .ci/run runs these tests in a pass without -race.

//go:build !race

package gateway_test

import (
	"testing"
	"time"
)

// TestExpiredMarkerAllocations: a batch of events whose deadline has passed
// allocates nothing at all: each marker is written into the batch's buffer, with
// one clock reading for the batch, and no event is encoded.
func TestExpiredMarkerAllocations(t *testing.T) {
	const runs = 10
	eachGatherer(t, func(t *testing.T, g *gatherRig, c gatherer) {
		g.ttl = time.Millisecond
		for _, room := range []string{"rr-a", "rr-b"} {
			g.publish(room, 42*(runs+1), `{"n":1}`, 42*(runs+1))
		}
		// The last deadline is at most 1ms after the last publish returned: wait
		// for the clock to pass it (an event not yet expired would allocate its
		// encoding, and the count would say so).
		time.Sleep(2 * time.Millisecond)
		if allocs := c.AllocsPerBatch(runs); allocs != 0 {
			t.Errorf("a batch of 84 expired events allocates %.1f times, want 0", allocs)
		}
	})
}
