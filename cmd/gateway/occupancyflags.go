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

// checkPodID: in fleet mode the pod id names the pod's occupancy records, so it
// must be one.
func checkPodID(c config, fromEnv map[string]bool) error {
	if c.Redis != "" && !replay.ValidPodID(c.Hot.PodID) {
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
