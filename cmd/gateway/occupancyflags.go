package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// registerOccupancy adds the occupancy flag: how often the pod records its rooms'
// member counts for the fleet (GET /admin/rooms/{room}).
func registerOccupancy(fs *flag.FlagSet, every *time.Duration) {
	fs.DurationVar(every, "occupancy-interval", 2*time.Second, "how often the pod records its rooms' member counts for GET /admin/rooms/{room} (in Redis in fleet mode); a record lives 3 intervals, so a pod that dies drops out within that")
}

// registerRebalance adds the rebalancing flags (gateway.Rebalance).
func registerRebalance(fs *flag.FlagSet, c *config) {
	fs.BoolVar(&c.Rebalance, "rebalance", false, "fleet mode: a pod holding more than the fleet's mean of open connections × (1 + --rebalance-margin) sheds a few each --occupancy-interval (reason shed, a retry: hint; clients resume by id where the router sends them), those whose rooms another pod holds more of first; never while draining, never below the mean")
	fs.Float64Var(&c.RebalanceMargin, "rebalance-margin", 0.1, "how far over the fleet's mean of open connections, as a fraction of it, a pod may be before --rebalance sheds")
	fs.Float64Var(&c.RebalanceRate, "rebalance-rate", 0.02, "the most --rebalance sheds, as a fraction of the pod's open connections per minute (at least one a minute), spread over the minute")
}

// checkPodID: the pod id names the pod in occupancy records and answers and among
// the owners of WebSocket clients, so one that is given (set, by the flag or its
// twin) must be one in every mode, and so must the hostname that stands in for it
// in fleet mode; embedded, an unusable hostname becomes "roomcast" (podID).
func checkPodID(c config, set bool, fromEnv map[string]bool) error {
	if (set || c.Redis != "") && !replay.ValidPodID(c.Hot.PodID) {
		return fmt.Errorf("%s %q: must be 1 to %d printable ASCII bytes without spaces (the hostname, unless set)",
			flagRef("pod-id", fromEnv), c.Hot.PodID, replay.MaxPodIDLen)
	}
	return nil
}

// podID is the pod's name in occupancy answers and records: --pod-id, or
// "roomcast" in embedded mode when the hostname cannot name a pod.
func (c config) podID() string {
	if replay.ValidPodID(c.Hot.PodID) {
		return c.Hot.PodID
	}
	return "roomcast"
}
