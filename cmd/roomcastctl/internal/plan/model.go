package plan

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Routing and Redis shapes.
const (
	RoundRobin = "round-robin"
	Affinity   = "affinity"
	Standalone = "standalone"
	Cluster    = "cluster"
)

// Bounds of the inputs: far beyond any fleet, small enough that the arithmetic is
// exact where it must be and every loop is short.
const (
	maxPods        = 100_000
	maxRooms       = 1_000_000_000_000
	maxMembers     = 10_000_000
	maxRate        = 1e12 // events/s over all rooms
	maxPayload     = 64 << 20
	maxShards      = 16384 // hash slots
	maxRoomNameLen = 128   // the wire contract's room name bound
	maxBytes       = 1 << 50
)

// Inputs is the workload and the fleet's shape.
type Inputs struct {
	Pods  int   `json:"pods"`
	Rooms int64 `json:"rooms"`
	// MembersMin and MembersMax bound the members of a room: each count in between is
	// equally likely (the same number for a fixed size).
	MembersMin int `json:"members_min"`
	MembersMax int `json:"members_max"`
	// PublishRate is events per second over all rooms, spread evenly over them.
	PublishRate float64 `json:"publish_rate"`
	// Payload is the size of an event's body as published (compact JSON), in bytes.
	Payload int    `json:"payload_bytes"`
	Routing string `json:"routing"` // RoundRobin or Affinity
	Redis   string `json:"redis"`   // Standalone or Cluster
	Shards  int    `json:"shards"`  // primaries; 1 for Standalone
	// RoomNameLen is the length of a room name, for the frame and doorbell sizes.
	RoomNameLen int `json:"room_name_len"`
	// PodMemory is a pod's memory limit, ReservedMemory the part of it that is not
	// for streams (the process at rest, --recent-bytes, --max-queued-bytes); 0 when
	// not given.
	PodMemory      int64 `json:"pod_memory_bytes,omitempty"`
	ReservedMemory int64 `json:"reserved_memory_bytes,omitempty"`
	// MaxStreams is the pods' admission cap (--max-streams); 0 when not given.
	MaxStreams int64 `json:"max_streams,omitempty"`
	// Per-shard limits (0: unknown): publishes/s, doorbell pushes/s and push bytes/s
	// one primary sustains.
	ShardPublishLimit  float64 `json:"shard_publish_limit,omitempty"`
	ShardDeliveryLimit float64 `json:"shard_delivery_limit,omitempty"`
	ShardEgressLimit   float64 `json:"shard_egress_limit,omitempty"`
}

// MembersMean is the mean members per room.
func (in Inputs) MembersMean() float64 {
	return (float64(in.MembersMin) + float64(in.MembersMax)) / 2
}

// Validate reports the first input out of its bounds.
func (in Inputs) Validate() error {
	switch {
	case in.Pods < 1 || in.Pods > maxPods:
		return fmt.Errorf("pods must be 1..%d, not %d", maxPods, in.Pods)
	case in.Rooms < 1 || in.Rooms > maxRooms:
		return fmt.Errorf("rooms must be 1..%d, not %d", int64(maxRooms), in.Rooms)
	case in.MembersMin < 1 || in.MembersMax > maxMembers || in.MembersMin > in.MembersMax:
		return fmt.Errorf("members must be 1..%d (a range lo-hi with lo <= hi), not %d-%d", maxMembers, in.MembersMin, in.MembersMax)
	case !(in.PublishRate >= 0 && in.PublishRate <= maxRate):
		return fmt.Errorf("publish rate must be 0..%g events/s, not %g", float64(maxRate), in.PublishRate)
	case in.Payload < 1 || in.Payload > maxPayload:
		return fmt.Errorf("payload must be 1..%d bytes, not %d", maxPayload, in.Payload)
	case in.Routing != RoundRobin && in.Routing != Affinity:
		return fmt.Errorf("routing must be %s or %s, not %q", RoundRobin, Affinity, in.Routing)
	case in.Redis != Standalone && in.Redis != Cluster:
		return fmt.Errorf("redis must be %s or %s, not %q", Standalone, Cluster, in.Redis)
	case in.Redis == Standalone && in.Shards != 1:
		return fmt.Errorf("a standalone redis is 1 shard, not %d", in.Shards)
	case in.Shards < 1 || in.Shards > maxShards:
		return fmt.Errorf("shards must be 1..%d, not %d", maxShards, in.Shards)
	case in.RoomNameLen < 1 || in.RoomNameLen > maxRoomNameLen:
		return fmt.Errorf("room name length must be 1..%d, not %d", maxRoomNameLen, in.RoomNameLen)
	case in.PodMemory < 0 || in.PodMemory > maxBytes || in.ReservedMemory < 0 || in.ReservedMemory > maxBytes:
		return errors.New("pod memory and reserved memory must be 0..1PiB")
	case in.MaxStreams < 0 || in.MaxStreams > maxRooms:
		return fmt.Errorf("max streams must be 0..%d, not %d", int64(maxRooms), in.MaxStreams)
	case in.PodMemory > 0 && in.ReservedMemory >= in.PodMemory:
		return fmt.Errorf("reserved memory (%d bytes) leaves nothing of the pod memory (%d bytes) for streams", in.ReservedMemory, in.PodMemory)
	}
	for _, l := range []float64{in.ShardPublishLimit, in.ShardDeliveryLimit, in.ShardEgressLimit} {
		if !(l >= 0 && l <= maxRate*maxPayload) {
			return fmt.Errorf("shard limits must be positive numbers, not %g", l)
		}
	}
	return nil
}

// Resource names, the rows of the utilisation table.
const (
	PodStreams      = "pod_streams"
	PodDeliveries   = "pod_deliveries"
	PodEgress       = "pod_egress"
	ShardPublishes  = "shard_publishes"
	ShardDeliveries = "shard_deliveries"
	ShardEgress     = "shard_egress"
)

// Resource is one resource's use against its limit.
type Resource struct {
	Name string  `json:"name"`
	Unit string  `json:"unit"`
	Use  float64 `json:"use"`
	// Limit, Utilisation (use / limit) and Scale (limit / use) are nil when the limit
	// is unknown (Unknown says why); Scale is nil too for a resource nothing uses.
	Limit       *float64 `json:"limit"`
	Utilisation *float64 `json:"utilisation"`
	Scale       *float64 `json:"scale_factor"`
	Unknown     string   `json:"unknown,omitempty"`
}

// Plan is what the model derives from Inputs and Limits.
type Plan struct {
	Inputs Inputs `json:"inputs"`
	Limits Limits `json:"limits"`

	// EPods is the mean number of pods one publish reaches.
	EPods float64 `json:"e_pods"`
	// StreamsPerPodLimit is how many streams a pod holds: what its memory holds,
	// capped by --max-streams (nil: unknown).
	StreamsPerPodLimit *float64 `json:"streams_per_pod_limit"`

	Streams       float64 `json:"streams"`
	StreamsPerPod float64 `json:"streams_per_pod"`
	// MemoryPerPod is streams × rss per stream + reserved (nil: unknown).
	MemoryPerPod *float64 `json:"memory_bytes_per_pod"`

	SSubscribes       float64 `json:"ssubscribes"`
	SSubscribesPerPod float64 `json:"ssubscribes_per_pod"`

	// BusyShards is the shards the rooms spread over: every shard, or one per room
	// when there are fewer rooms than shards.
	BusyShards                    int     `json:"busy_shards"`
	PublishesPerSec               float64 `json:"publishes_per_sec"`
	PublishesPerSecPerShard       float64 `json:"publishes_per_sec_per_shard"`
	RedisDeliveriesPerSec         float64 `json:"redis_deliveries_per_sec"`
	RedisDeliveriesPerSecPerShard float64 `json:"redis_deliveries_per_sec_per_shard"`
	DoorbellBytes                 int     `json:"doorbell_bytes"`
	RedisEgressPerSec             float64 `json:"redis_egress_bytes_per_sec"`
	RedisEgressPerSecPerShard     float64 `json:"redis_egress_bytes_per_sec_per_shard"`
	// HotRoomDeliveriesPerSec is the pushes/s of the largest room: one shard sends
	// them all, however many shards there are.
	HotRoomDeliveriesPerSec float64 `json:"hot_room_deliveries_per_sec"`

	FrameBytes                   int     `json:"frame_bytes"`
	ClientDeliveriesPerSecPerPod float64 `json:"client_deliveries_per_sec_per_pod"`
	ClientEgressPerSecPerPod     float64 `json:"client_egress_bytes_per_sec_per_pod"`

	Resources []Resource `json:"resources"`
	// FirstLimit names the resource that reaches its limit first, at FirstScale
	// times the load; empty when no limit is known.
	FirstLimit string   `json:"first_limit,omitempty"`
	FirstScale *float64 `json:"first_limit_scale_factor,omitempty"`
	// PodsNeeded is the fewest pods whose known per-pod limits all hold this load
	// (nil when no per-pod limit is known), and what the bus costs with that many:
	// under round-robin routing more pods mean more pods per publish.
	PodsNeeded                  *int     `json:"pods_needed"`
	EPodsAtPodsNeeded           *float64 `json:"e_pods_at_pods_needed"`
	RedisDeliveriesAtPodsNeeded *float64 `json:"redis_deliveries_per_sec_at_pods_needed"`
	Notes                       []string `json:"notes"`
}

// EPodsRoundRobin is the expected number of distinct pods among P that M members
// placed independently and uniformly land on: P·(1 − (1 − 1/P)^M).
func EPodsRoundRobin(pods, members int) float64 {
	return meanEPodsRoundRobin(pods, members, members)
}

// meanEPodsRoundRobin is EPodsRoundRobin averaged over members lo..hi, each equally
// likely, in closed form: the mean of q^m over the range is a geometric sum.
func meanEPodsRoundRobin(pods, lo, hi int) float64 {
	if pods <= 1 {
		return 1
	}
	p := float64(pods)
	q := 1 - 1/p
	n := float64(hi - lo + 1)
	// Σ_{m=lo}^{hi} q^m = q^lo · (1 − q^n) / (1 − q), and 1 − q = 1/P.
	meanQ := math.Pow(q, float64(lo)) * (1 - math.Pow(q, n)) * p / n
	return p * (1 - meanQ)
}

// EPodsAffinity is the pods a room of M members takes when the load balancer keeps
// a room on one pod until it is full: ceil(M / perPod), at most pods. perPod <= 0
// means unknown: every room is taken to fit one pod.
func EPodsAffinity(pods, members int, perPod float64) float64 {
	return meanEPodsAffinity(pods, members, members, perPod)
}

func meanEPodsAffinity(pods, lo, hi int, perPod float64) float64 {
	c := math.Floor(perPod)
	if c < 1 {
		return 1
	}
	if c >= float64(hi) {
		return 1
	}
	// ceil(m/c) is constant over blocks of c members: sum block by block. Members
	// are bounded (maxMembers), so there are at most that many blocks.
	ci := int(c)
	var sum float64
	for m := lo; m <= hi; {
		k := (m + ci - 1) / ci // ceil(m/c)
		end := min(k*ci, hi)   // last m with the same ceiling
		sum += float64(end-m+1) * float64(min(k, pods))
		m = end + 1
	}
	return sum / float64(hi-lo+1)
}

// Compute derives the plan. It fails only on inputs out of bounds.
func Compute(in Inputs, lim Limits) (*Plan, error) { return compute(in, lim, true) }

// compute derives the plan; withNeeded adds PodsNeeded (a second plan at that size).
func compute(in Inputs, lim Limits, withNeeded bool) (*Plan, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	p := &Plan{Inputs: in, Limits: lim}
	pods := float64(in.Pods)
	meanM := in.MembersMean()

	// Streams and memory.
	p.Streams = float64(in.Rooms) * meanM
	p.StreamsPerPod = p.Streams / pods
	streamLimitWhy := ""
	switch {
	case lim.RSSPerConnKiB == nil:
		streamLimitWhy = lim.missing("rss_per_conn_kib")
	case in.PodMemory == 0:
		streamLimitWhy = "no --pod-memory"
	default:
		perStream := *lim.RSSPerConnKiB * 1024
		n := math.Floor(float64(in.PodMemory-in.ReservedMemory) / perStream)
		p.StreamsPerPodLimit = &n
	}
	if in.MaxStreams > 0 {
		if n := float64(in.MaxStreams); p.StreamsPerPodLimit == nil || n < *p.StreamsPerPodLimit {
			p.StreamsPerPodLimit = &n
		}
	}
	if lim.RSSPerConnKiB != nil {
		m := p.StreamsPerPod**lim.RSSPerConnKiB*1024 + float64(in.ReservedMemory)
		p.MemoryPerPod = &m
	}

	// E_pods and the bus.
	perPod := 0.0
	if p.StreamsPerPodLimit != nil {
		perPod = *p.StreamsPerPodLimit
	}
	if in.Routing == RoundRobin {
		p.EPods = meanEPodsRoundRobin(in.Pods, in.MembersMin, in.MembersMax)
	} else {
		p.EPods = meanEPodsAffinity(in.Pods, in.MembersMin, in.MembersMax, perPod)
		if p.StreamsPerPodLimit == nil {
			p.note("affinity: every room is taken to fit on one pod (how many streams a pod holds is unknown: %s)", streamLimitWhy)
		} else if float64(in.MembersMax) > perPod*pods {
			p.note("affinity: a room of %d members does not fit on %d pods of %.0f streams", in.MembersMax, in.Pods, perPod)
		}
	}
	p.SSubscribes = float64(in.Rooms) * p.EPods
	p.SSubscribesPerPod = p.SSubscribes / pods

	// Redis.
	p.BusyShards = in.Shards
	if in.Rooms < int64(in.Shards) {
		p.BusyShards = int(in.Rooms)
		p.note("%d rooms use at most %d of the %d shards", in.Rooms, in.Rooms, in.Shards)
	}
	shards := float64(p.BusyShards)
	p.PublishesPerSec = in.PublishRate
	p.PublishesPerSecPerShard = in.PublishRate / shards
	p.RedisDeliveriesPerSec = in.PublishRate * p.EPods
	p.RedisDeliveriesPerSecPerShard = p.RedisDeliveriesPerSec / shards
	p.DoorbellBytes = DoorbellBytes(in.Payload, in.RoomNameLen, SampleSeq)
	p.RedisEgressPerSec = p.RedisDeliveriesPerSec * float64(p.DoorbellBytes)
	p.RedisEgressPerSecPerShard = p.RedisDeliveriesPerSecPerShard * float64(p.DoorbellBytes)
	perRoomRate := in.PublishRate / float64(in.Rooms)
	hotE := EPodsRoundRobin(in.Pods, in.MembersMax)
	if in.Routing == Affinity {
		hotE = EPodsAffinity(in.Pods, in.MembersMax, perPod)
	}
	p.HotRoomDeliveriesPerSec = perRoomRate * hotE
	if in.Shards > 1 {
		p.note("per-shard figures assume rooms spread evenly over the hash slots; one room is one slot, so a room's pushes (%.4g/s for the largest) all leave one shard: split a room every pod follows with --hot-rooms", p.HotRoomDeliveriesPerSec)
	}

	// Clients.
	p.FrameBytes = FrameBytes(in.Payload, in.RoomNameLen, SampleSeq)
	p.ClientDeliveriesPerSecPerPod = in.PublishRate * meanM / pods
	p.ClientEgressPerSecPerPod = p.ClientDeliveriesPerSecPerPod * float64(p.FrameBytes)

	// Utilisation.
	p.addResource(PodStreams, "streams", p.StreamsPerPod, p.StreamsPerPodLimit, streamLimitWhy)
	p.addResource(PodDeliveries, "events/s", p.ClientDeliveriesPerSecPerPod, lim.DeliveriesPerSec, lim.missing("deliveries_per_sec"))
	p.addResource(PodEgress, "bytes/s", p.ClientEgressPerSecPerPod, lim.EgressBytesPerSec, lim.missing("egress_bytes_per_sec"))
	p.addResource(ShardPublishes, "events/s", p.PublishesPerSecPerShard, known(in.ShardPublishLimit), "no --shard-publish-limit")
	p.addResource(ShardDeliveries, "pushes/s", p.RedisDeliveriesPerSecPerShard, known(in.ShardDeliveryLimit), "no --shard-delivery-limit")
	p.addResource(ShardEgress, "bytes/s", p.RedisEgressPerSecPerShard, known(in.ShardEgressLimit), "no --shard-egress-limit")
	for _, r := range p.Resources {
		if r.Scale != nil && (p.FirstScale == nil || *r.Scale < *p.FirstScale) {
			p.FirstLimit, p.FirstScale = r.Name, r.Scale
		}
	}
	if withNeeded {
		p.podsNeeded(lim)
	}
	if lim.Subscribers != nil && p.StreamsPerPod > float64(*lim.Subscribers) {
		p.note("%.0f streams per pod is more than the %d the limits were measured with: the per-pod limits are extrapolated", p.StreamsPerPod, *lim.Subscribers)
	}
	if lim.P99ms != nil {
		p.note("at the measured limits a pod's p99 publish-to-deliver latency was %.4g ms", *lim.P99ms)
	}
	return p, nil
}

// podsNeeded fills PodsNeeded: every per-pod use is a total over the pods, so the
// pods needed are the pods times the highest per-pod utilisation, rounded up.
func (p *Plan) podsNeeded(lim Limits) {
	worst := -1.0
	for _, r := range p.Resources {
		if r.Utilisation != nil && strings.HasPrefix(r.Name, "pod_") {
			worst = max(worst, *r.Utilisation)
		}
	}
	if worst < 0 {
		return
	}
	n := max(1, int(math.Ceil(float64(p.Inputs.Pods)*worst-1e-9)))
	if n > maxPods {
		p.note("more than %d pods needed", maxPods)
		return
	}
	p.PodsNeeded = &n
	e, d := p.EPods, p.RedisDeliveriesPerSec
	if n != p.Inputs.Pods {
		in := p.Inputs
		in.Pods = n
		q, err := compute(in, lim, false)
		if err != nil {
			return
		}
		e, d = q.EPods, q.RedisDeliveriesPerSec
	}
	p.EPodsAtPodsNeeded, p.RedisDeliveriesAtPodsNeeded = &e, &d
}

func known(v float64) *float64 {
	if v <= 0 {
		return nil
	}
	return &v
}

func (p *Plan) addResource(name, unit string, use float64, limit *float64, why string) {
	r := Resource{Name: name, Unit: unit, Use: use}
	if limit == nil || *limit <= 0 {
		r.Unknown = why
	} else {
		l := *limit
		u := use / l
		r.Limit, r.Utilisation = &l, &u
		if use > 0 {
			s := l / use
			r.Scale = &s
		}
	}
	p.Resources = append(p.Resources, r)
}

func (p *Plan) note(format string, args ...any) {
	p.Notes = append(p.Notes, fmt.Sprintf(format, args...))
}
