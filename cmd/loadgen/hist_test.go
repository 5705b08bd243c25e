package main

import (
	"math"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	// Every bucket's bounds map back to it and buckets tile the range without holes.
	var next uint64
	for b := range numBuckets {
		lo, hi := bucketBounds(b)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", b, lo, next)
		}
		if bucketOf(lo) != b || bucketOf(hi) != b {
			t.Fatalf("bucket %d [%d,%d] maps back to %d and %d", b, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= 2*subBuckets && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets+1e-9 {
			t.Fatalf("bucket %d [%d,%d] is wider than 1/%d of its value", b, lo, hi, subBuckets)
		}
		next = hi + 1
	}
	if next != maxMicros+1 {
		t.Fatalf("buckets end at %d, want %d", next, uint64(maxMicros)+1)
	}
	if got := bucketOf(math.MaxUint64); got != numBuckets-1 {
		t.Fatalf("huge value in bucket %d, want the last", got)
	}
}

func TestQuantiles(t *testing.T) {
	tests := []struct {
		name    string
		samples func(h *histogram)
		q       float64
		want    time.Duration
	}{
		{name: "empty", samples: func(*histogram) {}, q: 0.99, want: 0},
		{name: "one sample", samples: func(h *histogram) { h.record(1500 * time.Microsecond) }, q: 0.5, want: 1500 * time.Microsecond},
		{name: "exact small values p50", samples: uniform(1, 50), q: 0.5, want: 25 * time.Microsecond},
		{name: "uniform 1..10000us p50", samples: uniform(1, 10000), q: 0.5, want: 5000 * time.Microsecond},
		{name: "uniform 1..10000us p99", samples: uniform(1, 10000), q: 0.99, want: 9900 * time.Microsecond},
		{name: "uniform 1..10000us p999", samples: uniform(1, 10000), q: 0.999, want: 9990 * time.Microsecond},
		{name: "p100 is the max", samples: uniform(1, 10000), q: 1, want: 10000 * time.Microsecond},
		{name: "tail outlier", samples: func(h *histogram) {
			for range 999 {
				h.record(time.Millisecond)
			}
			h.record(2 * time.Second)
		}, q: 0.999, want: time.Millisecond},
		{name: "outlier is max", samples: func(h *histogram) {
			for range 999 {
				h.record(time.Millisecond)
			}
			h.record(2 * time.Second)
		}, q: 1, want: 2 * time.Second},
		{name: "negative clamps to zero", samples: func(h *histogram) { h.record(-time.Second) }, q: 0.5, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Split the samples over two histograms to exercise the merge.
			var a, b histogram
			tt.samples(&a)
			var l latencies
			l.add(&a)
			l.add(&b)
			got := l.quantile(tt.q)
			tolerance := time.Duration(float64(tt.want) / subBuckets)
			if got < tt.want-tolerance || got > tt.want+tolerance {
				t.Errorf("quantile(%v) = %v, want %v ± %v", tt.q, got, tt.want, tolerance)
			}
		})
	}
}

func TestMergeAndMean(t *testing.T) {
	var a, b histogram
	a.record(time.Millisecond)
	b.record(3 * time.Millisecond)
	var l latencies
	l.add(&a)
	l.add(&b)
	if l.total != 2 || l.mean() != 2*time.Millisecond || l.max != 3000 {
		t.Errorf("total %d mean %v max %dus, want 2, 2ms, 3000us", l.total, l.mean(), l.max)
	}
	// Quantiles report their bucket's upper bound: 1000us lies in [992us, 1007us].
	if p := l.quantile(0.5); p != 1007*time.Microsecond {
		t.Errorf("p50 = %v, want 1.007ms", p)
	}
}

func uniform(lo, hi int) func(*histogram) {
	return func(h *histogram) {
		for us := lo; us <= hi; us++ {
			h.record(time.Duration(us) * time.Microsecond)
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	var h histogram
	d := 1234 * time.Microsecond
	for b.Loop() {
		h.record(d)
	}
}
