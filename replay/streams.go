package replay

import (
	"context"
	"time"
)

// FleetStreams is the fleet's record of how many connections each pod holds open
// (streams, multiplexed streams and WebSocket connections, each counted once), so
// that a pod can compare itself with the fleet's mean (rebalancing). Each pod
// records its count, with a TTL, on the occupancy cadence; a pod that dies drops
// out within the TTL. Unlike a room's occupancy, a count of 0 is a record: an empty
// pod counts in the mean. Both logs' control planes implement it (ControlOf); a
// MemoryLog's knows of the pods that run on it, one in a product.
type FleetStreams interface {
	// SetStreams records that pod holds streams open connections, until ttl
	// passes. pod passes ValidPodID, streams is 0 to 999 999 999 999 999, ttl is at
	// least a millisecond; anything else is ErrInvalid. Repeating a call is safe.
	SetStreams(ctx context.Context, pod string, streams int, ttl time.Duration) error
	// ForgetStreams removes pod's record at once (a pod that stops).
	ForgetStreams(ctx context.Context, pod string) error
	// Streams returns the records that have not expired, in no particular order,
	// at most MaxFleetPods of them.
	Streams(ctx context.Context) ([]PodStreams, error)
}

// PodStreams is one pod's record of its open connections.
type PodStreams struct {
	Pod       string
	Streams   int
	UpdatedAt time.Time // when the pod recorded it, millisecond precision
	ExpiresAt time.Time // when it drops out unless recorded again
}

// MaxFleetPods bounds the records FleetStreams.Streams reports.
const MaxFleetPods = 1000

// validStreams checks SetStreams's arguments.
func validStreams(pod string, streams int, ttl time.Duration) bool {
	return ValidPodID(pod) && streams >= 0 && streams <= maxOccupancyMembers && ttl >= time.Millisecond
}

// liveStreams turns stored records (field, value pairs, as HGETALL gives them,
// values as encodeOccupancy writes them) into the records still in force at now
// (Unix ms). Malformed records are skipped and counted in bad.
func liveStreams(fields []string, now int64) (out []PodStreams, bad int) {
	return liveRecords(fields, now, 0, MaxFleetPods, func(pod string, n int, updated, expires time.Time) PodStreams {
		return PodStreams{Pod: pod, Streams: n, UpdatedAt: updated, ExpiresAt: expires}
	})
}
