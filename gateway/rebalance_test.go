package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestRebalanceShedsAwayFirst: a pod over the fleet's mean sheds first the
// connections of rooms another pod holds more of, then any, down to the mean's
// margin and no further. The fleet is the pod's own control plane (a MemoryLog's)
// holding another pod's records: most members of room "away", and the connections
// the pod sheds, which the test moves there as a router would.
func TestRebalanceShedsAwayFirst(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PodID: "here",
		Rebalance: gateway.Rebalance{On: true, Margin: 0.1, Rate: 10, Interval: 20 * time.Millisecond}}})
	ctl := control(t, p.mem)
	ctx := context.Background()
	if err := ctl.Streams.SetStreams(ctx, "there", 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Occupancy.SetOccupancy(ctx, "there", time.Hour, []replay.RoomCount{{Room: "away", Members: 50}}); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Occupancy.SetOccupancy(ctx, "here", time.Hour, []replay.RoomCount{{Room: "away", Members: 2}, {Room: "home", Members: 4}}); err != nil {
		t.Fatal(err)
	}
	away := []*stream{p.subscribe(t, "away", ""), p.subscribe(t, "away", "")}
	home := []*stream{p.subscribe(t, "home", ""), p.subscribe(t, "home", ""), p.subscribe(t, "home", ""), p.subscribe(t, "home", "")}
	replaytest.Eventually(t, 10*time.Second, "every stream joined", func() bool { return p.rooms.Len() == 6 })

	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.srv.Rebalance(rctx) }()
	t.Cleanup(func() { stop(); <-done })

	// Each stream shed here reconnects there, within milliseconds (the rate bound
	// lets one go a second).
	fctx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := ctl.Streams.SetStreams(ctx, "there", endedOf(away)+endedOf(home), time.Hour); err != nil {
				t.Error(err)
			}
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { stopFollow(); <-followed })
	follow := func() int { return endedOf(away) + endedOf(home) }
	// 6 here, 0 there: the mean is 3, so 3 move, the two away from home first.
	replaytest.Eventually(t, 20*time.Second, "two streams shed", func() bool { return follow() >= 2 })
	if a, h := endedOf(away), endedOf(home); a != 2 || h != 0 {
		t.Fatalf("the first two sheds ended %d away and %d home streams, want the 2 away ones", a, h)
	}
	replaytest.Eventually(t, 20*time.Second, "three streams shed, then balanced rounds", func() error {
		m, err := gatewaytest.Scrape(ctx, http.DefaultClient, p.admin.URL+"/metrics")
		if err != nil {
			return err
		}
		if shed := m.Value("roomcast_rebalance_shed_total"); shed != 3 {
			return fmt.Errorf("%v shed", shed)
		}
		if n := m.Value("roomcast_rebalance_rounds_total", "outcome", "balanced"); n < 3 {
			return fmt.Errorf("%v balanced rounds", n)
		}
		return nil
	})
	if a, h := endedOf(away), endedOf(home); a != 2 || h != 1 {
		t.Fatalf("%d away and %d home streams ended, want 2 and 1: down to the mean, no further", a, h)
	}
	recs, err := ctl.Streams.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Pod == "here" && r.Streams != 3 {
			t.Errorf("the pod records %d streams, want 3", r.Streams)
		}
	}
}

// TestRebalanceAlone: embedded, one pod is the fleet: it records its connections
// and never sheds.
func TestRebalanceAlone(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PodID: "alone",
		Rebalance: gateway.Rebalance{On: true, Rate: 10, Interval: 20 * time.Millisecond}}})
	open := []*stream{p.subscribe(t, "r", ""), p.subscribe(t, "r", "")}
	replaytest.Eventually(t, 10*time.Second, "every stream joined", func() bool { return p.rooms.Len() == 2 })
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.srv.Rebalance(ctx) }()
	replaytest.Eventually(t, 10*time.Second, "five balanced rounds", func() error {
		m, err := gatewaytest.Scrape(context.Background(), http.DefaultClient, p.admin.URL+"/metrics")
		if err != nil {
			return err
		}
		if n := m.Value("roomcast_rebalance_rounds_total", "outcome", "balanced"); n < 5 {
			return fmt.Errorf("%v balanced rounds", n)
		}
		return nil
	})
	recs, err := control(t, p.mem).Streams.Streams(context.Background())
	if err != nil || len(recs) != 1 || recs[0].Pod != "alone" || recs[0].Streams != 2 {
		t.Fatalf("records %+v (%v), want the pod's 2 streams", recs, err)
	}
	if n := endedOf(open); n != 0 {
		t.Fatalf("%d streams ended on a pod alone", n)
	}
	stop()
	<-done
	if recs, err := control(t, p.mem).Streams.Streams(context.Background()); err != nil || len(recs) != 0 {
		t.Fatalf("records %+v (%v) once rebalancing stopped, want none", recs, err)
	}
}
