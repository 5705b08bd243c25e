package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Log-linear buckets over microseconds: values below 2·subBuckets are exact, above
// that every power of two is split into subBuckets equal buckets, so a reported
// quantile is within 1/subBuckets (about 3%) of the true value.
const (
	subBucketBits = 5
	subBuckets    = 1 << subBucketBits
	maxMicros     = 1<<32 - 1 // about 71 minutes; longer latencies are clamped
	numBuckets    = (32 - subBucketBits + 1) * subBuckets
)

// bucketOf maps a latency in microseconds to its bucket.
func bucketOf(us uint64) int {
	if us < 2*subBuckets {
		return int(us)
	}
	if us > maxMicros {
		us = maxMicros
	}
	shift := bits.Len64(us) - subBucketBits - 1
	return shift*subBuckets + int(us>>shift)
}

// bucketBounds returns the smallest and largest microsecond values of bucket b.
func bucketBounds(b int) (lo, hi uint64) {
	if b < 2*subBuckets {
		return uint64(b), uint64(b)
	}
	shift := b/subBuckets - 1
	mantissa := uint64(b%subBuckets + subBuckets)
	return mantissa << shift, (mantissa+1)<<shift - 1
}

// histogram has one writer (its subscriber's goroutine) and any number of readers:
// counters are atomics updated with a plain load and store, so recording costs no
// locked instruction and a reader still sees whole values.
type histogram struct {
	counts [numBuckets]atomic.Uint64
	max    atomic.Uint64 // microseconds
	sum    atomic.Uint64 // microseconds
}

// record adds one latency. Only the owning goroutine may call it.
func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	us := uint64(d / time.Microsecond)
	c := &h.counts[bucketOf(us)]
	c.Store(c.Load() + 1)
	h.sum.Store(h.sum.Load() + us)
	if us > h.max.Load() {
		h.max.Store(us)
	}
}

// latencies is a merged, read-only copy of histograms.
type latencies struct {
	counts [numBuckets]uint64
	total  uint64
	max    uint64 // microseconds
	sum    uint64 // microseconds
}

// add merges h into l.
func (l *latencies) add(h *histogram) {
	for i := range h.counts {
		if n := h.counts[i].Load(); n > 0 {
			l.counts[i] += n
			l.total += n
		}
	}
	l.sum += h.sum.Load()
	if m := h.max.Load(); m > l.max {
		l.max = m
	}
}

// quantile returns the latency at or below which a fraction q of the samples lie:
// the upper bound of the bucket holding the nearest rank, never above the maximum seen.
func (l *latencies) quantile(q float64) time.Duration {
	if l.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(l.total)))
	rank = min(max(rank, 1), l.total)
	var seen uint64
	for b, n := range l.counts {
		seen += n
		if seen >= rank {
			_, hi := bucketBounds(b)
			return time.Duration(min(hi, l.max)) * time.Microsecond
		}
	}
	return time.Duration(l.max) * time.Microsecond
}

// mean returns the average latency.
func (l *latencies) mean() time.Duration {
	if l.total == 0 {
		return 0
	}
	return time.Duration(l.sum/l.total) * time.Microsecond
}
