package main

import (
	"context"
	"time"
)

// TimelinePoint is one second of the measured window: t is the end of that second,
// in seconds since the window began (the last point may close a shorter interval),
// and the rates and quantiles are over that second alone.
type TimelinePoint struct {
	T                float64 `json:"t"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`
	P50ms            float64 `json:"p50_ms"`
	P99ms            float64 `json:"p99_ms"`
	Reconnects       int64   `json:"reconnects"`
}

// timelineStep is the length of one timeline interval.
const timelineStep = time.Second

// sampler records the timeline of the measured window. It is used by one goroutine.
type sampler struct {
	ls    *loadState
	subs  []*subscriber
	start time.Time

	prevT   time.Time
	prevDel uint64
	prevRec int64
	prevLat latencies
	points  []TimelinePoint
}

func newSampler(ls *loadState, subs []*subscriber, start time.Time) *sampler {
	sm := &sampler{ls: ls, subs: subs, start: start, prevT: start,
		prevDel: sumDeliveries(subs), prevRec: ls.reconnects.Load(), points: []TimelinePoint{}}
	sm.prevLat = mergeLatencies(subs)
	return sm
}

// sample closes the interval that ends now.
func (sm *sampler) sample(now time.Time) {
	del, rec, lat := sumDeliveries(sm.subs), sm.ls.reconnects.Load(), mergeLatencies(sm.subs)
	p := TimelinePoint{T: now.Sub(sm.start).Seconds(), Reconnects: rec - sm.prevRec}
	if secs := now.Sub(sm.prevT).Seconds(); secs > 0 {
		p.DeliveriesPerSec = float64(del-sm.prevDel) / secs
	}
	d := lat.minus(&sm.prevLat)
	p.P50ms, p.P99ms = millis(d.quantile(0.50)), millis(d.quantile(0.99))
	sm.points = append(sm.points, p)
	sm.prevT, sm.prevDel, sm.prevRec, sm.prevLat = now, del, rec, lat
}

// run samples once per timelineStep until the window ends, and returns its end:
// once minEnd has passed and action is closed (the scenario's storm or drains are
// over), or at once when stop closes (publishing ended) or ctx is done. The window
// then has one point per second, the last one closing it.
func (sm *sampler) run(ctx context.Context, minEnd time.Time, action, stop <-chan struct{}) time.Time {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := 1; ; {
		now := time.Now()
		if !now.Before(minEnd) && closed(action) {
			sm.sample(now)
			return now
		}
		tick := sm.start.Add(time.Duration(k) * timelineStep)
		if !now.Before(tick) {
			sm.sample(now)
			k++
			continue
		}
		wake := tick
		var actionCh <-chan struct{}
		if now.Before(minEnd) {
			wake = earliest(wake, minEnd)
		} else {
			actionCh = action
		}
		timer.Reset(time.Until(wake))
		select {
		case <-timer.C:
		case <-actionCh:
		case <-stop:
			now = time.Now()
			sm.sample(now)
			return now
		case <-ctx.Done():
			now = time.Now()
			sm.sample(now)
			return now
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// closed reports whether ch is closed; a nil ch counts as closed.
func closed(ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// mergeLatencies merges every subscriber's histogram.
func mergeLatencies(subs []*subscriber) latencies {
	var l latencies
	for _, s := range subs {
		if s.hist != nil {
			l.add(s.hist)
		}
	}
	return l
}

// minus returns the samples in l that are not in prev, an earlier copy of the same
// histograms. Its max stays l's: an upper bound for the interval.
func (l *latencies) minus(prev *latencies) latencies {
	d := latencies{max: l.max, total: l.total - prev.total, sum: l.sum - prev.sum}
	for i := range l.counts {
		d.counts[i] = l.counts[i] - prev.counts[i]
	}
	return d
}
