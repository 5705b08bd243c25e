package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

// The chaos scenario's fleet: a 3+3 Redis Cluster and chaosPods gateway pods on it,
// every process on loopback and started by this process, and every one of them
// stopped by its process id when the run ends (or is interrupted).

// chaosPods is the number of gateway pods of the fleet; chaosShards the cluster's
// primaries (each with one replica).
const (
	chaosPods   = 3
	chaosShards = 3
)

// chaosNodeTimeout is the cluster's node timeout: a killed primary is failed over
// after about this long.
const chaosNodeTimeout = 2 * time.Second

// Pod timings: a drain is short (the streams move within a couple of seconds), and
// a restart after a crash may wait for the crashed process's pod id to lapse in
// Redis (15 s), so it is bounded above that.
const (
	podDrainDelay   = 200 * time.Millisecond
	podDrainWindow  = time.Second
	podDrainTimeout = 5 * time.Second
	podStartTimeout = 45 * time.Second
)

// fleet is the scenario's processes.
type fleet struct {
	dir     string
	cluster *redistest.Cluster
	// shards[i] are the two nodes of shard i as the cluster started: its primary
	// then, and that primary's replica. Either may be the primary now.
	shards [][]*redistest.Node
	// proxies stand before every node: the pods reach the cluster through them
	// alone, so that link faults can shape what they carry.
	proxies *redistest.ClusterProxies
	bin     string
	pods    []*chaosPod
	log     io.Writer

	mu        sync.Mutex
	stopping  bool
	out       func(pod int) // takes a pod out of the load's rotation; nil before the load
	incidents []string      // pods that exited when no fault asked them to
	started   time.Time
}

// logTailLines is how many of its last log lines an unexpectedly exited pod shows.
const logTailLines = 15

// chaosPod is one gateway pod: its id and listeners outlive its processes, so a
// restarted pod serves the same URLs under the same pod id.
type chaosPod struct {
	index       int
	id          string
	public      string // base URL
	admin       string // base URL
	addr, adm   string // host:port of the listeners
	mu          sync.Mutex
	proc        *gatewaytest.Process
	launchCount int
	expectExit  bool // the process is being ended on purpose
}

func (p *chaosPod) process() *gatewaytest.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc
}

// startFleet starts the cluster and the pods; on an error, what it started is
// stopped.
func startFleet(bin string, log io.Writer) (_ *fleet, err error) {
	dir, err := os.MkdirTemp("", "roomcast-chaos-")
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	fl := &fleet{dir: dir, bin: bin, log: log}
	defer func() {
		if err != nil {
			fl.stop()
		}
	}()
	fmt.Fprintf(log, "chaos: starting a 3+3 Redis cluster in %s\n", dir)
	if fl.cluster, err = redistest.NewCluster(filepath.Join(dir, "redis"), redistest.ClusterConfig{NodeTimeout: chaosNodeTimeout}); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	primaries, err := fl.cluster.TryPrimaries()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	for _, p := range primaries {
		reps, err := fl.cluster.TryReplicasOf(p)
		if err != nil || len(reps) != 1 {
			return nil, fmt.Errorf("chaos: primary %s: want one replica, have %d (%v)", p.Addr, len(reps), err)
		}
		fl.shards = append(fl.shards, []*redistest.Node{p, reps[0]})
	}
	if len(fl.shards) != chaosShards {
		return nil, fmt.Errorf("chaos: the cluster has %d primaries, want %d", len(fl.shards), chaosShards)
	}
	fmt.Fprintln(log, "chaos: putting a proxy before every node (link faults)")
	if fl.proxies, err = redistest.TryProxyCluster(fl.cluster); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if fl.bin == "" {
		fmt.Fprintln(log, "chaos: building ./cmd/gateway")
		if fl.bin, err = gatewaytest.Build(dir); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
	}
	for i := range chaosPods {
		p := &chaosPod{index: i, id: "chaos-pod-" + strconv.Itoa(i)}
		fl.pods = append(fl.pods, p)
		if err := fl.launch(p); err != nil {
			return nil, err
		}
		p.public, p.admin = p.proc.Public, p.proc.Admin
		p.addr, p.adm = p.proc.Addr(), p.proc.AdminAddr()
	}
	return fl, nil
}

// launch starts pod p's process: on its own listeners after the first start.
func (fl *fleet) launch(p *chaosPod) error {
	args := []string{
		"--redis", strings.Join(fl.proxies.Addrs(), ","),
		"--pod-id", p.id,
		"--drain-delay", podDrainDelay.String(),
		"--drain-window", podDrainWindow.String(),
		"--drain-timeout", podDrainTimeout.String(),
		"--retry-min", "200ms", "--retry-max", "1s",
		"--log-format", "json",
	}
	if p.addr != "" {
		args = append(args, "--addr", p.addr, "--admin-addr", p.adm)
	}
	proc, err := gatewaytest.Launch(gatewaytest.Options{
		Name: p.id, Bin: fl.bin, Args: args, StartTimeout: podStartTimeout,
	})
	if err != nil {
		return fmt.Errorf("chaos: start %s: %w", p.id, err)
	}
	p.mu.Lock()
	p.proc = proc
	p.expectExit = false
	p.launchCount++
	p.mu.Unlock()
	go fl.watch(p, proc)
	return nil
}

// expectExit marks pod p's process as about to end on purpose (a kill, a drain).
func (p *chaosPod) expectExitNow() {
	p.mu.Lock()
	p.expectExit = true
	p.mu.Unlock()
}

// watch waits for proc to end; when no fault and no stop asked it to, it says so
// with the end of the pod's log, records an incident and takes the pod out of the
// rotation (as a load balancer's health check would).
func (fl *fleet) watch(p *chaosPod, proc *gatewaytest.Process) {
	<-proc.Done()
	p.mu.Lock()
	expected := p.expectExit || p.proc != proc
	p.mu.Unlock()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if expected || fl.stopping {
		return
	}
	code, at, _ := proc.Exit()
	lines := strings.Split(proc.Log(), "\n")
	from := max(0, len(lines)-logTailLines)
	// A crash: from its first line (a panic's message and the top of its stack).
	if i := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ")
	}); i >= 0 {
		from = i
	}
	lines = lines[from:min(len(lines), from+2*logTailLines)]
	what := fmt.Sprintf("pod %d (%s, pid %d) exited on its own with code %d at %s", p.index, p.id, proc.Pid(), code, at.UTC().Format("15:04:05.000"))
	fl.incidents = append(fl.incidents, what)
	fmt.Fprintf(fl.log, "chaos: %s; the end of its log:\n  %s\n", what, strings.Join(lines, "\n  "))
	if fl.out != nil {
		fl.out(p.index)
	}
}

// incidentList returns the pods' unexpected exits so far.
func (fl *fleet) incidentList() []string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.incidents)
}

// setOut installs how a pod is taken out of the load's rotation.
func (fl *fleet) setOut(out func(pod int)) {
	fl.mu.Lock()
	fl.out = out
	fl.mu.Unlock()
}

// pids returns every process id of the fleet, for the operator.
func (fl *fleet) pids() string {
	var b strings.Builder
	for _, p := range fl.pods {
		if proc := p.process(); proc != nil {
			fmt.Fprintf(&b, " %s=%d", p.id, proc.Pid())
		}
	}
	if fl.cluster != nil {
		for _, n := range fl.cluster.Nodes() {
			if n.Alive() {
				fmt.Fprintf(&b, " redis:%d=%d", n.Port, n.PID())
			}
		}
	}
	return strings.TrimSpace(b.String())
}

// stop ends every process the fleet started, by process id: the pods (a stopped
// one is continued first, so that it can die) and the Redis nodes, then removes
// the fleet's directory.
func (fl *fleet) stop() {
	fl.mu.Lock()
	fl.stopping = true
	fl.mu.Unlock()
	for _, p := range fl.pods {
		if proc := p.process(); proc != nil {
			_ = proc.Signal(syscall.SIGCONT)
			proc.Kill()
		}
	}
	if fl.proxies != nil {
		fl.proxies.Stop()
	}
	if fl.cluster != nil {
		fl.cluster.Stop()
	}
	if fl.dir != "" {
		_ = os.RemoveAll(fl.dir)
	}
}

// primaryOf returns the node serving shard i now, and its live replica (nil when
// none is left).
func (fl *fleet) primaryOf(i int) (primary, replica *redistest.Node, err error) {
	for _, n := range fl.shards[i] {
		if !n.Alive() {
			continue
		}
		info, err := n.Info("replication")
		if err != nil {
			return nil, nil, fmt.Errorf("chaos: shard %d: %w", i, err)
		}
		if info["role"] == "master" {
			primary = n
		} else {
			replica = n
		}
	}
	if primary == nil {
		return nil, nil, fmt.Errorf("chaos: shard %d has no primary", i)
	}
	return primary, replica, nil
}

// shardOf returns the shard n belongs to.
func (fl *fleet) shardOf(n *redistest.Node) (int, error) {
	for i, nodes := range fl.shards {
		for _, m := range nodes {
			if m == n {
				return i, nil
			}
		}
	}
	return 0, errors.New("chaos: node of no shard")
}
