package main

import (
	"context"
	"sync/atomic"
	"time"
)

// pods are the servers under load, one base URL each (-url, repeatable). Subscriber
// i's home is pod i%len; a pod taken out (being drained) is skipped by new streams
// and publishes until it is put back.
type pods struct {
	// joiner > 0 (the rebalance scenario): a subscriber's first stream goes to pod
	// id%joiner, a later one to the pod in rotation with the fewest streams.
	joiner int
	urls   []string
	out    []atomic.Bool  // being drained: no new streams or publishes
	open   []atomic.Int64 // streams open on each pod
	next   atomic.Uint64  // round-robin position of publishes
}

func newPods(urls []string) *pods {
	return &pods{urls: urls, out: make([]atomic.Bool, len(urls)), open: make([]atomic.Int64, len(urls))}
}

// pick returns the pod subscriber id streams from: its home pod, or the next one in
// order that is not out. A nil pods (a test's bare loadState) is one pod.
func (p *pods) pick(id int) int {
	if p == nil || len(p.urls) < 2 {
		return 0
	}
	home := id % len(p.urls)
	for k := range len(p.urls) {
		if i := (home + k) % len(p.urls); !p.out[i].Load() {
			return i
		}
	}
	return home
}

// pickStream returns the pod a subscriber's stream goes to: pick, or under the
// rebalance scenario's routing (joiner) the first stream's pod id%joiner and a
// later one's (again) the least loaded pod in rotation.
func (p *pods) pickStream(id int, again bool) int {
	if p == nil || p.joiner == 0 {
		return p.pick(id)
	}
	if !again {
		return id % p.joiner
	}
	best := -1
	for i := range p.urls {
		if !p.out[i].Load() && (best < 0 || p.open[i].Load() < p.open[best].Load()) {
			best = i
		}
	}
	return max(best, 0)
}

// streams returns each pod's open streams.
func (p *pods) streams() []int64 {
	out := make([]int64, len(p.urls))
	for i := range out {
		out[i] = p.open[i].Load()
	}
	return out
}

// publishPod returns the pod the next publish goes to: round-robin over those in.
func (p *pods) publishPod() int {
	if p == nil || len(p.urls) < 2 {
		return 0
	}
	return p.pick(int(p.next.Add(1) % uint64(len(p.urls))))
}

// url returns pod i's URL for path; with one pod it is whole, the room's own URL.
func (p *pods) url(i int, path, whole string) string {
	if p == nil || len(p.urls) < 2 {
		return whole
	}
	return p.urls[i] + path
}

// streamOpened records s's new stream on pod, which cancel ends.
func (ls *loadState) streamOpened(s *subscriber, pod int, cancel context.CancelFunc) {
	ls.open.Add(1)
	if ls.pods != nil {
		ls.pods.open[pod].Add(1)
	}
	ls.connMu.Lock()
	defer ls.connMu.Unlock()
	s.open, s.pod, s.cancelConn = true, pod, cancel
	if s.stormPending {
		s.stormPending = false
		ls.storm.reconnected(time.Now())
	}
}

// streamClosed records the end of s's stream.
func (ls *loadState) streamClosed(s *subscriber) {
	ls.connMu.Lock()
	s.open, s.cancelConn = false, nil
	pod := s.pod
	ls.connMu.Unlock()
	if ls.pods != nil {
		ls.pods.open[pod].Add(-1)
	}
	ls.open.Add(-1)
}

// takeKicked reports, once, that s's last stream was ended on purpose.
func (ls *loadState) takeKicked(s *subscriber) bool {
	ls.connMu.Lock()
	defer ls.connMu.Unlock()
	k := s.kicked
	s.kicked = false
	return k
}
