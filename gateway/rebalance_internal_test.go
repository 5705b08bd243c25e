package gateway

import (
	"testing"
	"time"
)

// TestRebalanceExcess: what a pod sheds, from its count and the other pods'.
func TestRebalanceExcess(t *testing.T) {
	for _, c := range []struct {
		name   string
		local  int
		others []int
		margin float64
		want   int
	}{
		{"alone", 1000, nil, 0.1, 0},
		{"balanced", 100, []int{100, 100}, 0.1, 0},
		{"within the margin", 109, []int{100, 100}, 0.1, 0},
		{"three loaded, one new", 1000, []int{1000, 1000, 0}, 0.1, 175},
		{"one loaded, two empty", 24, []int{0, 0}, 0.1, 16},
		{"never below the mean", 3, []int{3, 3, 1}, 0.1, 0},
		{"small fleet, one over", 4, []int{2, 2, 2}, 0.1, 1},
		{"wide margin", 130, []int{100, 70}, 0.5, 0},
		{"under the mean", 10, []int{100, 100}, 0.1, 0},
		{"empty fleet", 0, []int{0, 0}, 0.1, 0},
		{"two pods", 11, []int{0}, 0.1, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, mean := rebalanceExcess(c.local, c.others, c.margin)
			if got != c.want {
				t.Fatalf("rebalanceExcess(%d, %v, %v) = %d (mean %.2f), want %d", c.local, c.others, c.margin, got, mean, c.want)
			}
			if got > 0 && float64(c.local-got) < mean {
				t.Fatalf("shedding %d takes the pod to %d, below the mean %.2f", got, c.local-got, mean)
			}
		})
	}
}

// TestShedBudget: the rate bound allows perMinute sheds a minute, spread over the
// rounds, a round's share below one saved up over the rounds.
func TestShedBudget(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name      string
		perMinute float64
		round     time.Duration
		want      int // sheds wanted each round
		rounds    int
		total     int // sheds allowed over the rounds
	}{
		{"20 a minute, rounds of 2s, for a minute", 20, 2 * time.Second, 100, 31, 20},
		{"600 a minute, rounds of 2s: 20 a round", 600, 2 * time.Second, 100, 3, 40},
		{"wants less than allowed", 600, 2 * time.Second, 3, 5, 12},
		{"one a minute", 1, 2 * time.Second, 5, 61, 2},
		{"nothing wanted", 600, 2 * time.Second, 0, 10, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b shedBudget
			got := 0
			for i := range c.rounds {
				n := b.take(t0.Add(time.Duration(i)*c.round), c.perMinute, c.round, c.want)
				if n < 0 || n > c.want {
					t.Fatalf("round %d allowed %d of %d wanted", i, n, c.want)
				}
				got += n
			}
			if got != c.total {
				t.Fatalf("%d sheds over %d rounds, want %d", got, c.rounds, c.total)
			}
		})
	}
	var b shedBudget
	b.take(t0, 600, 2*time.Second, 0)
	b.reset(t0.Add(time.Hour))
	if n := b.take(t0.Add(time.Hour+2*time.Second), 600, 2*time.Second, 1000); n != 20 {
		t.Fatalf("after a reset an hour long, a round allows %d, want one round's 20", n)
	}
}
