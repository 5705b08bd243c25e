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

// sampleLoop samples members' queue depths every SampleInterval until Close.
func (g *Registry) sampleLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			if f := g.observer().QueueDepth; f != nil {
				g.sampleQueues(f)
			}
		}
	}
}

// sampleQueues reports the queue depth of up to SampleMembers open members: every
// k-th member, k chosen from the pod's open members so that the sample spans them
// all. It takes each room's lock once, briefly; the fan-out path pays nothing.
func (g *Registry) sampleQueues(f func(int)) {
	open := g.open.Load()
	if open <= 0 {
		return
	}
	step := (open + int64(g.cfg.SampleMembers) - 1) / int64(g.cfg.SampleMembers)
	var i int64
	var depths []int
	g.eachRoom(func(r *room) {
		depths = depths[:0]
		r.mu.Lock()
		for m := range r.members {
			if m.reason.Load() != 0 {
				continue
			}
			if i%step == 0 {
				depths = append(depths, m.depth())
			}
			i++
		}
		r.mu.Unlock()
		for _, d := range depths {
			f(d)
		}
	})
}
