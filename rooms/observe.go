package rooms

import (
	"time"
)

// Observer receives the registry's measurements that a counter in Stats cannot
// carry. The registry calls it from its own goroutines and from the bus's ring
// callbacks, so every function must be fast and must not block. A nil field is not
// called.
type Observer struct {
	// QueueDepth receives the events waiting in one open member's queue, for a
	// sample of the members taken every Config.SampleInterval (at most
	// Config.SampleMembers of them per pass, spread over the pod's members).
	QueueDepth func(events int)
	// FanoutLag receives how long one event took from the doorbell's ring (or from
	// the ring that started a repair, for the events a repair delivers) until it was
	// offered to every member of its room: for one ring in 8 of each room (the
	// first, the ninth, ...) and for every event a repair delivers.
	FanoutLag func(time.Duration)
}

// Observe sets the registry's observer, replacing any previous one. It may be
// called at any time; measurements taken meanwhile go to either.
func (g *Registry) Observe(o Observer) {
	g.obs.Store(&o)
}

// observer is the registry's observer; never nil.
func (g *Registry) observer() *Observer {
	if o := g.obs.Load(); o != nil {
		return o
	}
	return &noObserver
}

var noObserver Observer

// sampleQueueDepths samples members' queue depths when an observer wants them.
func (g *Registry) sampleQueueDepths() {
	if f := g.observer().QueueDepth; f != nil {
		g.sampleQueues(f)
	}
}

// sampleQueues reports the queue depth of up to SampleMembers members: one in k of
// the pod's members, k chosen so that the sample spans them all, and in each room as
// many as its share, taken in the map's random order. It takes each room's lock
// once, and walks only the members it samples (and closed ones it skips), so a large
// room's lock is held for its share of the sample, not for all its members; the
// fan-out path pays nothing.
func (g *Registry) sampleQueues(f func(int)) {
	open := g.open.Load()
	if open <= 0 {
		return
	}
	step := (open + int64(g.cfg.SampleMembers) - 1) / int64(g.cfg.SampleMembers)
	// upTo(x) is how many of the indices 0 … x-1 are multiples of step.
	upTo := func(x int64) int64 { return (x + step - 1) / step }
	var i int64
	var depths []int
	g.eachRoom(func(r *room) {
		depths = depths[:0]
		r.mu.Lock()
		n := int64(len(r.members))
		want := upTo(i+n) - upTo(i)
		i += n
		for m := range r.members {
			if int64(len(depths)) >= want {
				break
			}
			if m.reason.Load() != 0 {
				continue
			}
			depths = append(depths, m.depth())
		}
		r.mu.Unlock()
		for _, d := range depths {
			f(d)
		}
	})
}
