package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/roomcast/roomcast/replay"
)

// hotFlags are the hot-room flags (fleet mode): rooms whose doorbell is split over
// several shard channels, and the pod's name that picks the one it listens to.
type hotFlags struct {
	Rooms      string
	Partitions int
	PodID      string
}

func (h *hotFlags) register(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&h.Rooms, "hot-rooms", "", "fleet mode: rooms followed by every pod, comma-separated names or prefixes ending in *; their doorbell is split over --hot-room-partitions shard channels (empty: none)")
	fs.IntVar(&h.Partitions, "hot-room-partitions", 4, "fleet mode: shard channels a hot room's doorbell is split over; every pod must use the same value")
	fs.StringVar(&h.PodID, "pod-id", host, "this pod's name among the fleet (default: the hostname), one per live pod: a pod whose id a live pod of the same Redis holds refuses to start; it names the pod in occupancy records and answers and among WebSocket client owners, and a hash of it picks the hot-room channel the pod listens to")
}

// check validates the hot-room flags; redis is whether --redis is set.
func (h hotFlags) check(redis bool, fromEnv map[string]bool) error {
	pats, err := replay.ParseHotRooms(h.Rooms)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", flagRef("hot-rooms", fromEnv), err)
	case len(pats) == 0:
		return nil
	case !redis:
		return errors.New("--hot-rooms: needs --redis (the embedded log has one pod and no shard channels)")
	case !replay.ValidPodID(h.PodID):
		return fmt.Errorf("%s %q: must be 1 to %d printable ASCII bytes without spaces (the hostname, unless set)", flagRef("pod-id", fromEnv), h.PodID, replay.MaxPodIDLen)
	}
	return nil
}

// redis is the hot-room part of the Redis log's configuration.
func (h hotFlags) redis() (replay.RedisConfig, error) {
	pats, err := replay.ParseHotRooms(h.Rooms)
	if err != nil {
		return replay.RedisConfig{}, fmt.Errorf("--hot-rooms: %w", err)
	}
	return replay.RedisConfig{HotRooms: pats, HotPartitions: h.Partitions, PodID: h.PodID}, nil
}
