// The race detector drops a quarter of what goes into a sync.Pool, so allocation
// counts are exact only without it: .ci/run runs these tests in a pass without -race.

//go:build !race

package gateway_test

import "testing"

// TestRoundRobinAllocations: gathering a batch from busy rooms allocates nothing per
// batch, once the connection's buffers have grown, and per item only the event's
// encoding in the transport's framing, which the first reader of an event makes and
// every other member shares (rooms' TestEncodedOncePerFraming): here the gatherer is
// each event's only reader.
func TestRoundRobinAllocations(t *testing.T) {
	const runs = 10
	eachGatherer(t, func(t *testing.T, g *gatherRig, c gatherer) {
		// Every batch takes a whole budget (42) from each of two rooms, the warm-up
		// batch included.
		for _, room := range []string{"rr-a", "rr-b"} {
			g.publish(room, 42*(runs+1), `{"n":1}`, 42*(runs+1))
		}
		if allocs := c.AllocsPerBatch(runs); allocs != 84 {
			t.Errorf("a batch of 84 events allocates %.1f times, want 84 (each event's encoding, nothing else)", allocs)
		}
		if _, _, n, more := c.Gather(); n != 0 || more {
			t.Errorf("after the batches measured, %d events left (more %v), want none", n, more)
		}
	})
}
