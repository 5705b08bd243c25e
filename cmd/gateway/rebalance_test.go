package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// Rebalancing without a deploy: pods with --rebalance on a Redis of their own (the
// fleet's record of connections per pod is one key: pods of other tests sharing a
// Redis would count in the mean).

// rebalanceArgs are the flags of a rebalancing pod: short rounds, and a rate that
// moves a small audience within seconds.
func rebalanceArgs(redis string, extra ...string) []string {
	return append([]string{
		"--redis", redis, "--rebalance", "--rebalance-margin", "0.1", "--rebalance-rate", "10",
		"--occupancy-interval", "200ms",
		"--retry-min", "200ms", "--retry-max", "800ms", "--heartbeat", "2s",
		"--max-streams-per-ip", "0",
	}, extra...)
}

// podConnections reads a pod's open connections from /admin/stats.
func podConnections(admin string) (int, error) {
	res, err := http.Get(admin + "/admin/stats")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var st struct {
		Connections int `json:"connections"`
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("stats: status %d", res.StatusCode)
	}
	return st.Connections, json.NewDecoder(res.Body).Decode(&st)
}

// scrape reads a pod's metrics.
func scrape(t *testing.T, admin string) gatewaytest.Metrics {
	t.Helper()
	m, err := gatewaytest.Scrape(context.Background(), http.DefaultClient, admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rounds(m gatewaytest.Metrics, outcome string) float64 {
	return m.Value("roomcast_rebalance_rounds_total", "outcome", outcome)
}

// TestFleetRebalance: one pod holds every subscriber when two empty pods join
// behind a round-robin balancer; with --rebalance it sheds, paced, until every pod
// is within the margin of the mean, then stops; the subscribers resume by id and
// lose nothing.
func TestFleetRebalance(t *testing.T) {
	redis := redistest.Standalone(t)
	pods := startPods(t, []string{"a"}, rebalanceArgs(redis.Addr)...)
	lb := newBalancer(t)
	lb.add(pods[0]).awaitReady(t, 10*time.Second)
	prefix := redistest.Prefix(t)
	rooms := roomNames(prefix, 3)
	const subs = 30
	a := startAudience(t, lb.url, rooms, subs)
	a.awaitPlaced(t, 10*time.Second, pods[0])
	tr := newTraffic(lb.url, prefix, rooms)
	stop := make(chan struct{})
	tr.run(40, stop)
	// A subscriber shed before its first event would resume from nothing: the
	// empty pods start once every subscriber holds a position.
	replaytest.Eventually(t, 20*time.Second, "every subscriber has an event", func() error {
		for _, s := range a.subs {
			if s.audit.Last() == (replay.Position{}) {
				return fmt.Errorf("subscriber %d has none", s.id)
			}
		}
		return nil
	})

	pods = append(pods, startPods(t, []string{"b", "c"}, rebalanceArgs(redis.Addr)...)...)
	joined := time.Now()
	lb.add(pods[1]).awaitReady(t, 10*time.Second)
	lb.add(pods[2]).awaitReady(t, 10*time.Second)
	// The mean is 10; within the margin is at most 11 (10 × 1.1).
	var counts []int
	replaytest.Eventually(t, 60*time.Second, "every pod within the margin", func() error {
		counts = counts[:0]
		total := 0
		for _, p := range pods {
			n, err := podConnections(p.admin)
			if err != nil {
				return err
			}
			counts = append(counts, n)
			total += n
		}
		if total != subs {
			return fmt.Errorf("connections %v: %d in all, want %d", counts, total, subs)
		}
		for _, n := range counts {
			if n > 11 {
				return fmt.Errorf("connections %v: one over 11", counts)
			}
		}
		return nil
	})
	t.Logf("connections per pod %v, %s after two empty pods joined", counts, time.Since(joined).Round(100*time.Millisecond))
	shedA := scrape(t, pods[0].admin).Value("roomcast_rebalance_shed_total")
	if shedA < subs-11 {
		t.Errorf("pod a shed %v connections; it had to shed at least %d", shedA, subs-11)
	}

	// Within the margin, nobody sheds: once the pods have settled (three balanced
	// rounds each, so every record they read is of the balanced fleet) and counted
	// five balanced rounds more, the shed counts are where they were.
	moreRounds := func(what string, n float64) []gatewaytest.Metrics {
		var from []gatewaytest.Metrics
		for _, p := range pods {
			from = append(from, scrape(t, p.admin))
		}
		replaytest.Eventually(t, 20*time.Second, what, func() error {
			for i, p := range pods {
				if got := rounds(scrape(t, p.admin), "balanced"); got < rounds(from[i], "balanced")+n {
					return fmt.Errorf("pod %s: %v balanced rounds", p.name, got)
				}
			}
			return nil
		})
		return from
	}
	moreRounds("the pods settle", 3)
	before := moreRounds("five more balanced rounds on every pod", 5)
	for i, p := range pods {
		if got, was := scrape(t, p.admin).Value("roomcast_rebalance_shed_total"), before[i].Value("roomcast_rebalance_shed_total"); got != was {
			t.Errorf("pod %s shed %v more connections while the fleet was within the margin", p.name, got-was)
		}
	}

	close(stop)
	rep := settle(t, tr, a, 20*time.Second)
	t.Logf("%d events acknowledged, none lost; pod a shed %v", rep.Acked, shedA)
}

// TestFleetRebalanceDraining: a draining pod never rebalances, however far over
// the mean it is.
func TestFleetRebalanceDraining(t *testing.T) {
	redis := redistest.Standalone(t)
	// A long drain delay keeps the draining pod's streams open.
	d := startPods(t, []string{"d"}, rebalanceArgs(redis.Addr, "--drain-delay", "1m", "--drain-timeout", "2m")...)[0]
	rooms := roomNames(redistest.Prefix(t), 2)
	const subs = 12
	startAudience(t, d.public, rooms, subs)
	res, err := http.Post(d.admin+"/admin/drain", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	replaytest.Eventually(t, 10*time.Second, "pod d counts a draining round", func() error {
		if n := rounds(scrape(t, d.admin), "draining"); n < 1 {
			return fmt.Errorf("%v draining rounds", n)
		}
		return nil
	})
	// An empty pod joins: d is now twice the mean. Once e has recorded itself and d
	// has counted five draining rounds since, d has had every chance to shed.
	e := startPods(t, []string{"e"}, rebalanceArgs(redis.Addr)...)[0]
	replaytest.Eventually(t, 10*time.Second, "pod e records itself", func() error {
		if n := rounds(scrape(t, e.admin), "balanced"); n < 1 {
			return fmt.Errorf("%v balanced rounds", n)
		}
		return nil
	})
	from := rounds(scrape(t, d.admin), "draining")
	replaytest.Eventually(t, 10*time.Second, "five draining rounds on pod d", func() error {
		if n := rounds(scrape(t, d.admin), "draining"); n < from+5 {
			return fmt.Errorf("%v draining rounds", n)
		}
		return nil
	})
	m := scrape(t, d.admin)
	if shed := m.Value("roomcast_rebalance_shed_total"); shed != 0 {
		t.Fatalf("the draining pod shed %v connections to rebalance", shed)
	}
	if n, err := podConnections(d.admin); err != nil || n != subs {
		t.Fatalf("the draining pod holds %d connections (%v), want %d", n, err, subs)
	}
}
