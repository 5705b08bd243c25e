package gateway

import (
	"testing"
	"time"
)

// TestWSBucket: the bucket's steps at given times, for a burst of 4: a full bucket
// at first, one warning, silent drops within the grace, a close after it, and a
// fresh warning once the client has slowed down.
func TestWSBucket(t *testing.T) {
	const ms = int64(time.Millisecond)
	type step struct {
		at   int64 // ms
		want int
	}
	for _, tc := range []struct {
		name  string
		rate  float64
		steps []step
	}{
		{"burst then warn then close", 0.5, []step{
			{0, rateOK}, {0, rateOK}, {0, rateOK}, {0, rateOK},
			{1, rateWarn}, {200, rateDrop}, {999, rateDrop}, {1002, rateClose},
		}},
		{"refill serves", 2, []step{
			{0, rateOK}, {0, rateOK}, {0, rateOK}, {0, rateOK},
			{500, rateOK}, {501, rateWarn}, {1000, rateOK}, {1001, rateDrop},
		}},
		{"slowing down re-arms the warning", 2, []step{
			{0, rateOK}, {0, rateOK}, {0, rateOK}, {0, rateOK},
			{1, rateWarn}, {1100, rateOK}, {1101, rateOK}, {1102, rateWarn},
		}},
		{"never more than the burst", 2, []step{
			{0, rateOK}, {10_000, rateOK}, {10_000, rateOK}, {10_000, rateOK}, {10_000, rateOK}, {10_000, rateWarn},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b wsBucket
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			for i, s := range tc.steps {
				if got := b.take(base+s.at*ms, tc.rate, 4); got != s.want {
					t.Fatalf("step %d at %dms: %d, want %d (bucket %+v)", i, s.at, got, s.want, b)
				}
			}
		})
	}
}
