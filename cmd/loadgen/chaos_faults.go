package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"syscall"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
)

// Fault kinds, by name.
const (
	kindFailover    = "failover"     // CLUSTER FAILOVER on a shard's replica
	kindKillPrimary = "kill-primary" // kill -9 of a shard's primary; the node stays down
	kindKillPod     = "kill-pod"     // kill -9 of a pod, restarted on its pod id after Hold
	kindDrainPod    = "drain-pod"    // POST /admin/drain, restarted once it has exited
	kindShed        = "shed"         // POST /admin/shed: every stream of a pod ends
	kindMigrate     = "migrate"      // a room's slot moved to another primary
	kindPausePod    = "pause-pod"    // SIGSTOP of a pod for Hold, then SIGCONT
	kindBlackhole   = "blackhole"    // a shard primary's link silent both ways, no FIN, for Hold
	kindLatency     = "latency"      // every link's replies delayed by Delay ± half, for Hold
	kindBandwidth   = "bandwidth"    // a shard primary's replies to the pods capped, for Hold
)

// faultKinds is every kind the schedule draws from, in this order before the
// shuffle.
var faultKinds = []faultKind{
	redisFault{kindFailover}, redisFault{kindKillPrimary}, migrateFault{},
	podFault{kindKillPod}, podFault{kindDrainPod}, podFault{kindShed}, podFault{kindPausePod},
	linkFault{kindBlackhole}, linkFault{kindLatency}, linkFault{kindBandwidth},
}

// chaosEnv is what a fault acts on.
type chaosEnv struct {
	fl    *fleet
	pods  *pods // the load's view of the pods: a pod out gets no new streams or publishes
	admin *http.Client
	rooms func(int) string
}

// redisFault fails over or kills the primary of a shard that still has a replica.
type redisFault struct{ kind string }

func (k redisFault) name() string { return k.kind }

func (k redisFault) plan(rng *rand.Rand, st *planState) (Fault, bool) {
	shard, ok := st.shardWithReplica(rng)
	if !ok {
		return Fault{}, false
	}
	if k.kind == kindKillPrimary {
		st.noReplica[shard] = true
	}
	return Fault{Target: shard}, true
}

func (k redisFault) inject(_ context.Context, env *chaosEnv, f Fault) (string, error) {
	c := env.fl.cluster
	primary, replica, err := env.fl.primaryOf(f.Target)
	if err != nil {
		return "", err
	}
	if replica == nil {
		return "", fmt.Errorf("chaos: shard %d has no replica", f.Target)
	}
	if k.kind == kindFailover {
		if err := c.TryFailover(replica); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s took over from %s", replica.Addr, primary.Addr), nil
	}
	if err := c.TryKill(primary); err != nil {
		return "", err
	}
	return fmt.Sprintf("killed %s (left down), %s took over", primary.Addr, replica.Addr), nil
}

// migrateFault moves a room's slot, with its keys, to the primary of another shard.
type migrateFault struct{}

func (migrateFault) name() string { return kindMigrate }

func (migrateFault) plan(rng *rand.Rand, st *planState) (Fault, bool) {
	if st.shards < 2 || st.rooms < 1 {
		return Fault{}, false
	}
	return Fault{Target: rng.IntN(st.rooms), Shift: 1 + rng.IntN(st.shards-1)}, true
}

func (migrateFault) inject(_ context.Context, env *chaosEnv, f Fault) (string, error) {
	fl := env.fl
	slot := redistest.Slot("room:{" + env.rooms(f.Target) + "}:seq")
	from, err := fl.cluster.TryNodeForSlot(slot)
	if err != nil {
		return "", err
	}
	shard, err := fl.shardOf(from)
	if err != nil {
		return "", err
	}
	to, _, err := fl.primaryOf((shard + f.Shift) % len(fl.shards))
	if err != nil {
		return "", err
	}
	if err := fl.cluster.TryMigrateSlot(slot, from, to); err != nil {
		return "", err
	}
	return fmt.Sprintf("slot %d %s → %s", slot, from.Addr, to.Addr), nil
}

// podFault acts on one gateway pod.
type podFault struct{ kind string }

func (k podFault) name() string { return k.kind }

func (k podFault) plan(rng *rand.Rand, st *planState) (Fault, bool) {
	f := Fault{Target: rng.IntN(st.pods)}
	switch k.kind {
	case kindKillPod:
		f.Hold = time.Second + time.Duration(rng.IntN(30))*100*time.Millisecond
	case kindPausePod:
		f.Hold = 2*time.Second + time.Duration(rng.IntN(40))*100*time.Millisecond
	}
	return f, true
}

func (k podFault) inject(ctx context.Context, env *chaosEnv, f Fault) (string, error) {
	fl := env.fl
	p := fl.pods[f.Target]
	proc := p.process()
	if !proc.Running() {
		return "", fmt.Errorf("chaos: pod %d is down: it exited on its own", f.Target)
	}
	switch k.kind {
	case kindShed:
		n, err := shed(ctx, env.admin, p.admin, "", 100000)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d streams shed", n), nil
	case kindPausePod:
		if err := proc.Signal(syscall.SIGSTOP); err != nil {
			return "", err
		}
		waitFor(ctx, nil, f.Hold)
		if err := proc.Signal(syscall.SIGCONT); err != nil {
			return "", err
		}
		return fmt.Sprintf("pid %d stopped for %s", proc.Pid(), f.Hold), nil
	}
	// A pod that goes away leaves the rotation, as a load balancer's health check
	// would take it out, and comes back once restarted.
	env.pods.out[f.Target].Store(true)
	var how string
	switch k.kind {
	case kindKillPod:
		p.expectExitNow()
		proc.Kill()
		how = fmt.Sprintf("pid %d killed", proc.Pid())
		waitFor(ctx, nil, f.Hold)
	case kindDrainPod:
		p.expectExitNow()
		if err := adminPost(ctx, env.admin, p.admin+"/admin/drain", "", nil); err != nil {
			return "", err
		}
		code, err := proc.Wait(podDrainTimeout + 10*time.Second)
		if err != nil {
			return "", err
		}
		how = fmt.Sprintf("pid %d drained (exit %d)", proc.Pid(), code)
	}
	if ctx.Err() != nil {
		return how, ctx.Err()
	}
	start := time.Now()
	if err := fl.launch(p); err != nil {
		return how, err
	}
	env.pods.out[f.Target].Store(false)
	return fmt.Sprintf("%s, restarted as pid %d in %.1fs", how, p.process().Pid(), time.Since(start).Seconds()), nil
}

// linkFault shapes the links between the pods and Redis: every pod reaches every
// node through the node's proxy (toxiproxy, chaos_fleet.go), so a toxic on a node's
// proxy faults every pod's link to it, commands and subscriptions alike.
type linkFault struct{ kind string }

// bandwidthKBps is the cap of a bandwidth fault on what a primary sends the pods:
// far below what its shard's doorbells and replies need, so that Redis buffers
// for the pods' connections and their calls time out.
const bandwidthKBps = 1

func (k linkFault) name() string { return k.kind }

func (k linkFault) plan(rng *rand.Rand, st *planState) (Fault, bool) {
	tenths := func(lo time.Duration, n int) time.Duration {
		return lo + time.Duration(rng.IntN(n+1))*100*time.Millisecond
	}
	switch k.kind {
	case kindLatency:
		// 200 ms to 1 s, for 10 to 30 s.
		return Fault{Delay: tenths(200*time.Millisecond, 8), Hold: tenths(10*time.Second, 200)}, true
	case kindBlackhole:
		// Longer than a pod takes to find a silent link (replay.DetectionBound:
		// 6 s with --redis-timeout 2s), so that every pod drops and redials it.
		return Fault{Target: rng.IntN(st.shards), Hold: tenths(8*time.Second, 40)}, true
	}
	return Fault{Target: rng.IntN(st.shards), Hold: tenths(8*time.Second, 40)}, true
}

func (k linkFault) inject(ctx context.Context, env *chaosEnv, f Fault) (string, error) {
	fl := env.fl
	var (
		on    []*redistest.Proxy
		typ   string
		attrs map[string]any
		dirs  []redistest.Stream
		what  string
	)
	switch k.kind {
	case kindLatency:
		on, typ = fl.proxies.All(), "latency"
		attrs = map[string]any{"latency": f.Delay.Milliseconds(), "jitter": f.Delay.Milliseconds() / 2}
		dirs = []redistest.Stream{redistest.Downstream}
		what = fmt.Sprintf("every node's replies %s ± %s late for %s", f.Delay, f.Delay/2, f.Hold)
	default:
		primary, _, err := fl.primaryOf(f.Target)
		if err != nil {
			return "", err
		}
		on = []*redistest.Proxy{fl.proxies.For(primary)}
		if k.kind == kindBlackhole {
			typ, attrs = "timeout", map[string]any{"timeout": 0}
			what = fmt.Sprintf("%s silent for %s", primary.Addr, f.Hold)
		} else {
			typ, attrs = "bandwidth", map[string]any{"rate": bandwidthKBps}
			dirs = []redistest.Stream{redistest.Downstream}
			what = fmt.Sprintf("%s sends %d KB/s for %s", primary.Addr, bandwidthKBps, f.Hold)
		}
	}
	var removes []func()
	defer func() {
		for _, remove := range removes {
			remove()
		}
	}()
	for _, p := range on {
		remove, err := p.AddToxic(typ, attrs, dirs...)
		if err != nil {
			return "", err
		}
		removes = append(removes, remove)
	}
	waitFor(ctx, nil, f.Hold)
	return what, nil
}
