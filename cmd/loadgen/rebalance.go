package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// The rebalance scenario: the streams start on every -url but the last, which
// joins empty at the start of the measured window, as a pod added by a scale-out.
// The pods are expected to run with --rebalance: the loaded ones shed, and a shed
// (or otherwise ended) stream reconnects to the pod in rotation with the fewest of
// the run's streams, as a least-connections balancer sends it (nginx least_conn);
// a subscriber's first stream goes to pod id%(pods-1). The scenario follows each
// pod's streams until max/mean ≤ rebalanceTarget, bounded by -rebalance-wait.

// rebalanceTarget is the balance the scenario waits for: the most streams on one
// pod over the mean per pod.
const rebalanceTarget = 1.2

// rebalancePoll is how often the scenario looks at the pods' streams; a point of
// its series is kept every rebalanceEvery, at most maxRebalancePoints of them.
const (
	rebalancePoll      = 100 * time.Millisecond
	rebalanceEvery     = time.Second
	maxRebalancePoints = 3600
)

// RebalanceResult is the rebalance scenario's outcome.
type RebalanceResult struct {
	// Joined is the pod that joined empty.
	Joined string `json:"joined"`
	// Target is the max/mean the scenario waited for; Converged whether it came,
	// Seconds from the join until it did (or until the wait ended).
	Target    float64 `json:"target"`
	Converged bool    `json:"converged"`
	Seconds   float64 `json:"seconds"`
	// MaxOverMean is the max/mean at the end of the wait.
	MaxOverMean float64 `json:"max_over_mean"`
	// Streams are each pod's streams of the run at the join and at the end, in -url
	// order.
	StreamsAtJoin []int64 `json:"streams_at_join"`
	StreamsAtEnd  []int64 `json:"streams_at_end"`
	// Sheds are each pod's roomcast_rebalance_shed_total, read from its -admin-url
	// at the end (-1: no admin URL, or it could not be read).
	Sheds []int64 `json:"sheds"`
	// Series is each pod's streams once a second from the join.
	Series []RebalancePoint `json:"series"`
	Error  string           `json:"error,omitempty"`
}

// RebalancePoint is the pods' streams at one moment.
type RebalancePoint struct {
	Seconds float64 `json:"seconds"`
	Streams []int64 `json:"streams"`
}

// maxOverMean is the most streams on one pod over the mean per pod.
func maxOverMean(streams []int64) float64 {
	var total, most int64
	for _, n := range streams {
		total += n
		most = max(most, n)
	}
	if total == 0 {
		return 0
	}
	return float64(most) / (float64(total) / float64(len(streams)))
}

// runRebalance puts the last pod in rotation and follows the pods' streams until
// they are balanced within rebalanceTarget, or -rebalance-wait passes.
func runRebalance(ctx context.Context, ls *loadState, admin *http.Client) *RebalanceResult {
	p := ls.pods
	last := len(p.urls) - 1
	res := &RebalanceResult{Joined: p.urls[last], Target: rebalanceTarget, Series: []RebalancePoint{}}
	start := time.Now()
	res.StreamsAtJoin = p.streams()
	p.out[last].Store(false)
	deadline := start.Add(ls.cfg.RebalanceWait)
	tick := time.NewTicker(rebalancePoll)
	defer tick.Stop()
	var nextPoint time.Time
	for {
		now := time.Now()
		streams := p.streams()
		if !now.Before(nextPoint) && len(res.Series) < maxRebalancePoints {
			res.Series = append(res.Series, RebalancePoint{Seconds: now.Sub(start).Seconds(), Streams: streams})
			nextPoint = now.Add(rebalanceEvery)
		}
		res.MaxOverMean, res.StreamsAtEnd = maxOverMean(streams), streams
		res.Seconds = now.Sub(start).Seconds()
		if res.MaxOverMean > 0 && res.MaxOverMean <= rebalanceTarget {
			res.Converged = true
			break
		}
		if now.After(deadline) {
			res.Error = fmt.Sprintf("max/mean %.2f after %s, want at most %.1f", res.MaxOverMean, ls.cfg.RebalanceWait, rebalanceTarget)
			break
		}
		select {
		case <-ctx.Done():
			res.Error = "interrupted before the pods were balanced"
			res.Sheds = readSheds(context.Background(), ls.cfg, admin)
			return res
		case <-tick.C:
		}
	}
	res.Series = append(res.Series, RebalancePoint{Seconds: res.Seconds, Streams: res.StreamsAtEnd})
	res.Sheds = readSheds(ctx, ls.cfg, admin)
	return res
}

// readSheds reads each pod's roomcast_rebalance_shed_total from its -admin-url.
func readSheds(ctx context.Context, cfg *Config, admin *http.Client) []int64 {
	out := make([]int64, len(cfg.URLs))
	for i := range out {
		out[i] = -1
		if i >= len(cfg.AdminURLs) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
		m, err := gatewaytest.Scrape(sctx, admin, cfg.AdminURLs[i]+"/metrics")
		cancel()
		if v, ok := m["roomcast_rebalance_shed_total"]; err == nil && ok {
			out[i] = int64(v)
		}
	}
	return out
}
