package redistest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/roomcast/roomcast/replay/polltest"
)

// Entry points for programs that drive a cluster outside a test (the load
// generator's chaos scenario): the same operations as the testing.TB methods, which
// call these, but returning errors. The caller stops what it started (Stop).

// NewCluster starts a 3+3 cluster whose nodes live in dir; it fails when
// redis-server or redis-cli is not on PATH. The caller must call Stop.
func NewCluster(dir string, cfg ClusterConfig) (*Cluster, error) {
	if err := lookBinaries(); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redistest: cluster dir: %w", err)
	}
	return startCluster(dir, cfg)
}

// Stop kills every node (SIGKILL, by process id) and reaps it. It is safe to call
// more than once.
func (c *Cluster) Stop() { c.stop() }

// TryWaitOK is WaitOK returning an error.
func (c *Cluster) TryWaitOK() error {
	if err := polltest.Until(c.failoverBound(), func() error { return c.ready(false) }); err != nil {
		return fmt.Errorf("redistest: cluster not ok: %w", err)
	}
	return nil
}

func (c *Cluster) tryAnyLive() (*Node, error) {
	live := c.live()
	if len(live) == 0 {
		return nil, errors.New("redistest: no live node")
	}
	return live[0], nil
}

// TryNodeForSlot is NodeForSlot returning an error.
func (c *Cluster) TryNodeForSlot(slot int) (*Node, error) {
	n0, err := c.tryAnyLive()
	if err != nil {
		return nil, err
	}
	own, _, err := c.owners(n0)
	if err != nil {
		return nil, err
	}
	n := c.byID(own[slot])
	if n == nil {
		return nil, fmt.Errorf("redistest: no primary serves slot %d", slot)
	}
	return n, nil
}

// TryPrimaries is Primaries returning an error.
func (c *Cluster) TryPrimaries() ([]*Node, error) {
	return c.liveWhere(func(v nodeView) bool { return v.has("master") && !v.failed() && len(v.slots) > 0 })
}

// TryReplicasOf is ReplicasOf returning an error.
func (c *Cluster) TryReplicasOf(primary *Node) ([]*Node, error) {
	return c.liveWhere(func(v nodeView) bool { return v.master == primary.id && !v.failed() })
}

// liveWhere returns the live nodes whose view, as a live node sees them, passes keep.
func (c *Cluster) liveWhere(keep func(v nodeView) bool) ([]*Node, error) {
	n0, err := c.tryAnyLive()
	if err != nil {
		return nil, err
	}
	views, err := c.view(n0)
	if err != nil {
		return nil, err
	}
	var out []*Node
	for _, n := range c.nodes {
		if v, ok := views[n.id]; ok && n.Alive() && keep(v) {
			out = append(out, n)
		}
	}
	return out, nil
}

// TryFailover is Failover returning an error.
func (c *Cluster) TryFailover(replica *Node) error {
	var asked time.Time
	err := polltest.Until(c.failoverBound(), func() error {
		info, err := replica.Info("replication")
		if err != nil {
			return err
		}
		if info["role"] != "master" {
			// A manual failover that times out (its primary did not pause in time, or
			// the vote failed) is abandoned by Redis: ask again.
			if time.Since(asked) > 2*c.cfg.NodeTimeout+time.Second {
				if _, err := replica.Do("CLUSTER", "FAILOVER"); err != nil {
					return err
				}
				asked = time.Now()
			}
			return fmt.Errorf("%s: role %s: %w", replica.Addr, info["role"], errNotReady)
		}
		return c.viewsThenReady(replica.id, func(n *Node, v nodeView, _ bool) error {
			if !v.has("master") || len(v.slots) == 0 {
				return fmt.Errorf("%s does not see %s as primary yet: %w", n.Addr, replica.Addr, errNotReady)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("redistest: failover to %s: %w", replica.Addr, err)
	}
	return nil
}

// viewsThenReady checks every live node's view of id (everyView), then that the
// cluster is ok.
func (c *Cluster) viewsThenReady(id string, check func(asked *Node, v nodeView, listed bool) error) error {
	if err := c.everyView(id, check); err != nil {
		return err
	}
	return c.ready(false)
}

// TryKill is Kill returning an error.
func (c *Cluster) TryKill(n *Node) error {
	n.kill()
	err := polltest.Until(c.failoverBound(), func() error {
		return c.viewsThenReady(n.id, func(m *Node, v nodeView, ok bool) error {
			if ok && !v.has("fail") {
				return fmt.Errorf("%s does not flag %s failed yet: %w", m.Addr, n.Addr, errNotReady)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("redistest: after killing %s: %w", n.Addr, err)
	}
	return nil
}

// TryBeginMigration is BeginMigration returning an error.
func (c *Cluster) TryBeginMigration(slot int, from, to *Node) error {
	s := strconv.Itoa(slot)
	if _, err := to.Do("CLUSTER", "SETSLOT", s, "IMPORTING", from.id); err != nil {
		return err
	}
	_, err := from.Do("CLUSTER", "SETSLOT", s, "MIGRATING", to.id)
	return err
}

// TryMigrateKeys is MigrateKeys returning an error.
func (c *Cluster) TryMigrateKeys(slot int, from, to *Node, keys ...string) error {
	migrate := func(keys []string) error {
		args := append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(to.Port), "", "0", "5000", "KEYS"}, keys...)
		if out, err := from.Do(args...); err != nil || (out != "OK" && out != "NOKEY") {
			return fmt.Errorf("redistest: migrate %d keys of slot %d: %q %v", len(keys), slot, out, err)
		}
		return nil
	}
	if len(keys) > 0 {
		return migrate(keys)
	}
	for {
		out, err := from.Do("CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), "100")
		if err != nil {
			return err
		}
		if out == "" {
			return nil
		}
		if err := migrate(strings.Split(out, "\n")); err != nil {
			return err
		}
	}
}

// TryFinishMigration is FinishMigration returning an error.
func (c *Cluster) TryFinishMigration(slot int, from, to *Node) error {
	s := strconv.Itoa(slot)
	if _, err := to.Do("CLUSTER", "SETSLOT", s, "NODE", to.id); err != nil {
		return err
	}
	if _, err := from.Do("CLUSTER", "SETSLOT", s, "NODE", to.id); err != nil {
		return err
	}
	primaries, err := c.TryPrimaries()
	if err != nil {
		return err
	}
	for _, p := range primaries {
		if p != to && p != from {
			if _, err := p.Do("CLUSTER", "SETSLOT", s, "NODE", to.id); err != nil {
				return err
			}
		}
	}
	err = polltest.Until(30*time.Second, func() error {
		for _, n := range c.live() {
			own, _, err := c.owners(n)
			if err != nil {
				return err
			}
			if own[slot] != to.id {
				return fmt.Errorf("%s: slot %d still on %s: %w", n.Addr, slot, own[slot], errNotReady)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redistest: finishing migration of slot %d: %w", slot, err)
	}
	return nil
}

// TryMigrateSlot is MigrateSlot returning an error.
func (c *Cluster) TryMigrateSlot(slot int, from, to *Node) error {
	if from == to {
		return errors.New("redistest: migrate to the same node")
	}
	if err := c.TryBeginMigration(slot, from, to); err != nil {
		return err
	}
	if err := c.TryMigrateKeys(slot, from, to); err != nil {
		return err
	}
	return c.TryFinishMigration(slot, from, to)
}
