package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/polltest"
)

// ClusterConfig shapes a cluster. Every zero value means "the default".
type ClusterConfig struct {
	// NodeTimeout is cluster-node-timeout: how long a node may be unreachable before
	// it is failed over (default 5s). Tests that kill nodes use less to run faster.
	NodeTimeout time.Duration
}

// Cluster is a Redis Cluster of 3 primaries with one replica each, on loopback.
type Cluster struct {
	cfg   ClusterConfig
	nodes []*Node
}

// StartCluster starts a cluster for t alone, stopped when t ends. Use it for tests
// that fail over, kill or migrate; other tests share SharedCluster.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	c, err := startCluster(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

func startCluster(dir string, cfg ClusterConfig) (*Cluster, error) {
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 5 * time.Second
	}
	c := &Cluster{cfg: cfg}
	for i := 0; i < 6; i++ {
		ndir := filepath.Join(dir, "n"+strconv.Itoa(i))
		if err := os.MkdirAll(ndir, 0o700); err != nil {
			c.stop()
			return nil, err
		}
		n, err := startNode(ndir, true, cfg.NodeTimeout, Options{})
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	if err := c.create(); err != nil {
		c.stop()
		return nil, err
	}
	if err := polltest.Until(60*time.Second, func() error { return c.ready(true) }); err != nil {
		c.stop()
		return nil, fmt.Errorf("redistest: cluster not ready: %w", err)
	}
	return c, nil
}

func (c *Cluster) create() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redistest: redis-cli --cluster create: %v: %s", err, out)
	}
	for _, n := range c.nodes {
		id, err := n.Do("CLUSTER", "MYID")
		if err != nil {
			return err
		}
		n.id = id
	}
	return nil
}

func (c *Cluster) stop() {
	for _, n := range c.nodes {
		n.kill()
	}
}

// Nodes returns every node, live or killed.
func (c *Cluster) Nodes() []*Node { return slices.Clone(c.nodes) }

// Addrs returns the addresses of the live nodes, a seed list for clients.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.nodes {
		if n.Alive() {
			out = append(out, n.Addr)
		}
	}
	return out
}

func (c *Cluster) byID(id string) *Node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (c *Cluster) live() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.Alive() {
			out = append(out, n)
		}
	}
	return out
}

// nodeView is one line of CLUSTER NODES.
type nodeView struct {
	id, master string
	flags      []string
	slots      [][2]int // stable ranges; migrating/importing markers are skipped
}

func (v nodeView) has(flag string) bool { return slices.Contains(v.flags, flag) }

func (v nodeView) failed() bool { return v.has("fail") || v.has("fail?") }

// everyView asks every live node what it says of node id, and returns the first
// error check makes of it; check gets the asking node, its view of id and whether
// it lists id at all.
func (c *Cluster) everyView(id string, check func(asked *Node, v nodeView, listed bool) error) error {
	for _, n := range c.live() {
		views, err := c.view(n)
		if err != nil {
			return err
		}
		v, ok := views[id]
		if err := check(n, v, ok); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) view(n *Node) (map[string]nodeView, error) {
	out, err := n.Do("CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	views := make(map[string]nodeView)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		v := nodeView{id: f[0], flags: strings.Split(f[2], ","), master: f[3]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue
			}
			lo, hi, found := strings.Cut(s, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if found {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil {
				v.slots = append(v.slots, [2]int{a, b})
			}
		}
		views[v.id] = v
	}
	return views, nil
}

// owners maps every slot to the id of the primary that n believes serves it.
func (c *Cluster) owners(n *Node) ([]string, map[string]nodeView, error) {
	views, err := c.view(n)
	if err != nil {
		return nil, nil, err
	}
	own := make([]string, Slots)
	for _, v := range views {
		if !v.has("master") {
			continue
		}
		for _, r := range v.slots {
			for s := r[0]; s <= r[1] && s < Slots; s++ {
				own[s] = v.id
			}
		}
	}
	return own, views, nil
}

// ready checks that every live node reports cluster_state:ok with every slot served,
// that all live nodes agree which primary serves each slot, that every such primary
// is alive and not flagged failed, and, when withReplicas is set, that every primary
// has a replica whose link is up.
func (c *Cluster) ready(withReplicas bool) error {
	live := c.live()
	roles := make(map[string]string, len(live))
	for _, m := range live {
		info, err := m.Info("replication")
		if err != nil {
			return err
		}
		roles[m.id] = info["role"]
	}
	var first []string
	for _, n := range live {
		out, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			return err
		}
		info := parseFields(out)
		if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" {
			return fmt.Errorf("%s: cluster_state %s, slots ok %s: %w", n.Addr, info["cluster_state"], info["cluster_slots_ok"], errNotReady)
		}
		own, views, err := c.owners(n)
		if err != nil {
			return err
		}
		for s, id := range own {
			p := c.byID(id)
			if id == "" || p == nil || !p.Alive() || views[id].failed() {
				return fmt.Errorf("%s: slot %d served by %q: %w", n.Addr, s, id, errNotReady)
			}
		}
		if first == nil {
			first = own
		} else if !slices.Equal(first, own) {
			return fmt.Errorf("%s: slot owners differ from %s: %w", n.Addr, live[0].Addr, errNotReady)
		}
		// Every live node must agree on the role of every live node: a replica that
		// others still take for a primary cannot win a failover election.
		for _, m := range live {
			v, ok := views[m.id]
			if !ok {
				return fmt.Errorf("%s does not know %s: %w", n.Addr, m.Addr, errNotReady)
			}
			if (roles[m.id] == "slave") != v.has("slave") {
				return fmt.Errorf("%s takes %s for a %s: %w", n.Addr, m.Addr, v.flags, errNotReady)
			}
		}
	}
	if !withReplicas {
		return nil
	}
	for _, n := range live {
		info, err := n.Info("replication")
		if err != nil {
			return err
		}
		switch info["role"] {
		case "master":
			if info["connected_slaves"] == "0" || !strings.Contains(info["slave0"], "state=online") {
				return fmt.Errorf("%s: no replica online: %w", n.Addr, errNotReady)
			}
		case "slave":
			if info["master_link_status"] != "up" {
				return fmt.Errorf("%s: replica link %s: %w", n.Addr, info["master_link_status"], errNotReady)
			}
		}
	}
	return nil
}

// WaitOK waits until every live node reports the cluster ok, agrees on the slot
// owners, and every slot is served by a live primary.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	if err := c.TryWaitOK(); err != nil {
		t.Fatal(err)
	}
}

// WaitState waits until every live node reports cluster_state equal to state ("ok"
// or "fail").
func (c *Cluster) WaitState(t testing.TB, state string) {
	t.Helper()
	err := polltest.Until(c.failoverBound(), func() error {
		for _, n := range c.live() {
			out, err := n.Do("CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if got := parseFields(out)["cluster_state"]; got != state {
				return fmt.Errorf("%s: cluster_state %s: %w", n.Addr, got, errNotReady)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: waiting for cluster_state %s: %v", state, err)
	}
}

// failoverBound is how long a failover may take: detection (node timeout) plus the
// election, with room for a slow machine.
func (c *Cluster) failoverBound() time.Duration { return 6*c.cfg.NodeTimeout + 30*time.Second }

// NodeForSlot returns the primary serving slot.
func (c *Cluster) NodeForSlot(t testing.TB, slot int) *Node {
	t.Helper()
	n, err := c.TryNodeForSlot(slot)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// SlotOwners maps every slot to the primary serving it, from one reading of the
// cluster's view (NodeForSlot reads it on every call): for tests that look up many
// keys at once.
func (c *Cluster) SlotOwners(t testing.TB) []*Node {
	t.Helper()
	n, err := c.tryAnyLive()
	if err != nil {
		t.Fatal(err)
	}
	own, _, err := c.owners(n)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*Node, len(own))
	for slot, id := range own {
		if out[slot] = c.byID(id); out[slot] == nil {
			t.Fatalf("redistest: no primary serves slot %d", slot)
		}
	}
	return out
}

// NodeForKey returns the primary serving key (or channel).
func (c *Cluster) NodeForKey(t testing.TB, key string) *Node {
	t.Helper()
	return c.NodeForSlot(t, Slot(key))
}

// Primaries returns the live primaries that serve slots.
func (c *Cluster) Primaries(t testing.TB) []*Node {
	t.Helper()
	out, err := c.TryPrimaries()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ReplicasOf returns the live replicas of primary.
func (c *Cluster) ReplicasOf(t testing.TB, primary *Node) []*Node {
	t.Helper()
	out, err := c.TryReplicasOf(primary)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// WaitReplicated waits until every replica attached to primary has acknowledged
// everything primary had written when the call began.
func (c *Cluster) WaitReplicated(t testing.TB, primary *Node) {
	t.Helper()
	info, err := primary.Info("replication")
	if err != nil {
		t.Fatal(err)
	}
	want, err := strconv.ParseInt(info["master_repl_offset"], 10, 64)
	if err != nil {
		t.Fatalf("redistest: master_repl_offset %q", info["master_repl_offset"])
	}
	err = polltest.Until(30*time.Second, func() error {
		info, err := primary.Info("replication")
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(info["connected_slaves"])
		if n == 0 {
			return fmt.Errorf("%s has no replica: %w", primary.Addr, errNotReady)
		}
		for i := 0; i < n; i++ {
			for _, f := range strings.Split(info["slave"+strconv.Itoa(i)], ",") {
				if v, ok := strings.CutPrefix(f, "offset="); ok {
					if got, _ := strconv.ParseInt(v, 10, 64); got < want {
						return fmt.Errorf("replica %d at offset %d of %d: %w", i, got, want, errNotReady)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: replication of %s: %v", primary.Addr, err)
	}
}

// Failover runs CLUSTER FAILOVER on replica and waits until it is the primary of its
// shard in every live node's view and the cluster is ok.
func (c *Cluster) Failover(t testing.TB, replica *Node) {
	t.Helper()
	if err := c.TryFailover(replica); err != nil {
		t.Fatal(err)
	}
}

// Kill sends SIGKILL to n and, when n was a primary, waits until a replica took over
// its slots and the cluster is ok again. Use KillNoWait when no replica can take
// over.
func (c *Cluster) Kill(t testing.TB, n *Node) {
	t.Helper()
	if err := c.TryKill(n); err != nil {
		t.Fatal(err)
	}
}

// KillNoWait sends SIGKILL to n and returns at once.
func (c *Cluster) KillNoWait(t testing.TB, n *Node) {
	t.Helper()
	n.kill()
}

// BeginMigration opens slot for migration: IMPORTING on to, MIGRATING on from.
// Keys stay on from until MigrateKeys moves them.
func (c *Cluster) BeginMigration(t testing.TB, slot int, from, to *Node) {
	t.Helper()
	if err := c.TryBeginMigration(slot, from, to); err != nil {
		t.Fatal(err)
	}
}

// MigrateKeys moves keys of slot from one node to the other with MIGRATE: the given
// keys, or, with none given, every key of the slot in batches of 100.
func (c *Cluster) MigrateKeys(t testing.TB, slot int, from, to *Node, keys ...string) {
	t.Helper()
	if err := c.TryMigrateKeys(slot, from, to, keys...); err != nil {
		t.Fatal(err)
	}
}

// FinishMigration assigns slot to to on every primary (to first, then from) and
// waits until every live node agrees.
func (c *Cluster) FinishMigration(t testing.TB, slot int, from, to *Node) {
	t.Helper()
	if err := c.TryFinishMigration(slot, from, to); err != nil {
		t.Fatal(err)
	}
}

// MigrateSlot moves slot and all its keys from one primary to another: SETSLOT
// IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, from, to *Node) {
	t.Helper()
	if err := c.TryMigrateSlot(slot, from, to); err != nil {
		t.Fatal(err)
	}
}
