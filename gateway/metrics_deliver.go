package gateway

import (
	"time"
)

// observeDelivered observes the publish-to-deliver latency of the events of one
// write that went out: from each event's ts (Unix milliseconds) to now. A clock
// behind the publisher's counts as zero.
func (s *Server) observeDelivered(ts []int64) {
	if len(ts) == 0 {
		return
	}
	now := float64(time.Now().UnixMicro()) / 1e6
	for _, t := range ts {
		if t > 0 {
			s.m.publishToDeliver.Observe(max(now-float64(t)/1e3, 0))
		}
	}
}
