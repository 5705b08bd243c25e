package gateway

import (
	"sync"
	"time"
)

// tsPool lends the list of publish times of one write's events, borrowed only
// while a stream has something to write, as its batch buffer is.
var tsPool = sync.Pool{New: func() any { s := make([]int64, 0, batchItems); return &s }}

// putTS returns a list of publish times to tsPool, unless it grew past four
// batches' worth.
func putTS(tp *[]int64, ts []int64) {
	if cap(ts) > 4*batchItems {
		return
	}
	*tp = ts[:0]
	tsPool.Put(tp)
}

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
