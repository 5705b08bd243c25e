package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"
)

// The chaos scenario's schedule: which faults, on which targets, when. It is drawn
// from -seed alone (math/rand/v2's PCG), so a seed that found a fault replays the
// same schedule. Each kind of fault is one faultKind in faultKinds; a kind draws its
// own target and parameters (plan) and injects itself into the fleet (inject).
// Faults of the network between the processes (a blackholed, slow or narrow link)
// plug in as further faultKinds.

// faultKind is one kind of fault the scenario can inject.
type faultKind interface {
	// name is the kind's name in -faults, the schedule and the report.
	name() string
	// plan draws a fault of this kind from rng, given what the faults before it
	// left (st); ok is false when none is possible now (no shard has a replica
	// left to fail over to). It updates st with what the fault leaves behind.
	plan(rng *rand.Rand, st *planState) (f Fault, ok bool)
	// inject runs the fault on the fleet and returns once its own repair is done:
	// the node or pod back, or replaced. What it says goes into the timeline.
	inject(ctx context.Context, env *chaosEnv, f Fault) (detail string, err error)
}

// Fault is one planned fault.
type Fault struct {
	// At is the nominal time into the measured window; a fault also waits for the
	// previous one's recovery.
	At   time.Duration `json:"at"`
	Kind string        `json:"kind"`
	// Target is a shard (failover, kill-primary: the shard of the i-th primary the
	// cluster started with), a pod (kill-pod, drain-pod, shed, pause-pod) or a room
	// (migrate).
	Target int `json:"target"`
	// Shift is migrate's destination: the shard Shift places after the room's.
	Shift int `json:"shift,omitempty"`
	// Hold is how long pause-pod keeps the pod stopped, kill-pod the pod down, and
	// a link fault (blackhole, latency, bandwidth) lasts.
	Hold time.Duration `json:"hold,omitempty"`
	// Delay is latency's delay of every reply (± half of it).
	Delay time.Duration `json:"delay,omitempty"`
}

// planState is what the schedule knows of the fleet while it draws.
type planState struct {
	pods, shards, rooms int
	// noReplica marks the shards whose replica is gone: their primary was killed
	// and the replica took over, with none left behind it (a killed Redis node
	// stays down).
	noReplica []bool
}

// shardWithReplica draws a shard that still has a replica.
func (st *planState) shardWithReplica(rng *rand.Rand) (int, bool) {
	var ok []int
	for i := range st.shards {
		if !st.noReplica[i] {
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return 0, false
	}
	return ok[rng.IntN(len(ok))], true
}

// scheduleSpec is what a schedule is drawn for.
type scheduleSpec struct {
	seed     uint64
	duration time.Duration
	gap      time.Duration
	count    int      // 0: as many as duration holds
	kinds    []string // allowed kinds, faultKinds order when empty
	pods     int
	shards   int
	rooms    int
}

// maxFaults bounds a schedule.
const maxFaults = 1000

// newSchedule draws the schedule for spec. The kinds come from a bag refilled and
// shuffled whenever it runs empty, so over a run every kind comes up about equally
// often; the first fault is at half a gap, each next one a gap (±25%) later.
func newSchedule(spec scheduleSpec) []Fault {
	rng := rand.New(rand.NewPCG(spec.seed, spec.seed^0x9e3779b97f4a7c15))
	st := &planState{pods: spec.pods, shards: spec.shards, rooms: spec.rooms, noReplica: make([]bool, spec.shards)}
	var kinds []faultKind
	for _, k := range faultKinds {
		if len(spec.kinds) == 0 || slices.Contains(spec.kinds, k.name()) {
			kinds = append(kinds, k)
		}
	}
	var out []Fault
	var bag []faultKind
	at := spec.gap / 2
	for len(out) < maxFaults && len(kinds) > 0 {
		if spec.count > 0 && len(out) == spec.count || spec.count == 0 && at > spec.duration-spec.gap/2 {
			break
		}
		var f Fault
		ok := false
		// Draw until a kind is possible; a whole bag of impossible kinds ends the
		// schedule.
		for tries := 0; !ok && tries < 2*len(kinds); tries++ {
			if len(bag) == 0 {
				bag = slices.Clone(kinds)
				rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
			}
			k := bag[0]
			bag = bag[1:]
			if f, ok = k.plan(rng, st); ok {
				f.Kind = k.name()
			}
		}
		if !ok {
			break
		}
		f.At = at.Round(100 * time.Millisecond)
		out = append(out, f)
		at += time.Duration(float64(spec.gap) * (0.75 + 0.5*rng.Float64()))
	}
	return out
}

// describe names a fault's target for the schedule and the timeline.
func (f Fault) describe(roomName func(int) string) string {
	switch f.Kind {
	case kindFailover, kindKillPrimary:
		return fmt.Sprintf("shard %d", f.Target)
	case kindMigrate:
		return fmt.Sprintf("room %s → shard +%d", roomName(f.Target), f.Shift)
	case kindKillPod:
		return fmt.Sprintf("pod %d (down %s)", f.Target, f.Hold)
	case kindPausePod:
		return fmt.Sprintf("pod %d (stopped %s)", f.Target, f.Hold)
	case kindBlackhole:
		return fmt.Sprintf("shard %d (silent %s)", f.Target, f.Hold)
	case kindBandwidth:
		return fmt.Sprintf("shard %d (%d KB/s for %s)", f.Target, bandwidthKBps, f.Hold)
	case kindLatency:
		return fmt.Sprintf("every link (%s ± %s for %s)", f.Delay, f.Delay/2, f.Hold)
	}
	return fmt.Sprintf("pod %d", f.Target)
}

// writeSchedule prints the schedule.
func writeSchedule(w io.Writer, seed uint64, faults []Fault, roomName func(int) string) {
	fmt.Fprintf(w, "chaos schedule (seed %d): %d faults\n", seed, len(faults))
	for i, f := range faults {
		fmt.Fprintf(w, "  %2d  +%-7s  %-12s  %s\n", i+1, f.At, f.Kind, f.describe(roomName))
	}
}

// faultKindNames returns the names of every fault kind, in table order.
func faultKindNames() []string {
	out := make([]string, len(faultKinds))
	for i, k := range faultKinds {
		out[i] = k.name()
	}
	return out
}

// validateChaos rejects chaos settings that cannot run.
func (c *Config) validateChaos() error {
	var errs []error
	for _, k := range c.Faults {
		if !slices.Contains(faultKindNames(), k) {
			errs = append(errs, fmt.Errorf("-faults: unknown kind %q: want some of %v", k, faultKindNames()))
		}
	}
	if c.FaultCount < 0 || c.FaultCount > maxFaults {
		errs = append(errs, fmt.Errorf("-fault-count must be 0 to %d", maxFaults))
	}
	if c.FaultGap < time.Second || c.RecoveryBound <= 0 {
		errs = append(errs, errors.New("-fault-gap must be >= 1s and -recovery-bound > 0"))
	}
	if c.Protocol != protocolRoomcast {
		errs = append(errs, errors.New("-scenario chaos runs roomcast gateways: -protocol roomcast"))
	}
	return errors.Join(errs...)
}
