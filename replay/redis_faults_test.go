package replay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// Fault tests: each starts its own cluster, since it fails over, kills or migrates.

func otherPrimary(t *testing.T, c *redistest.Cluster, not *redistest.Node) *redistest.Node {
	t.Helper()
	for _, p := range c.Primaries(t) {
		if p != not {
			return p
		}
	}
	t.Fatal("no other primary")
	return nil
}

func errorCount(t *testing.T, n *redistest.Node, prefix string) int {
	t.Helper()
	v, err := n.ErrorCount(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// untilSeq reads rings until one with seq, within d.
func (r *ringRecorder) untilSeq(t *testing.T, seq uint64, d time.Duration) replay.Event {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ev := r.next(t, time.Until(deadline))
		if ev.Seq == seq {
			return ev
		}
		if ev.Seq > seq {
			t.Fatalf("ring for seq %d, want %d", ev.Seq, seq)
		}
	}
}

func TestRedisSlotMigration(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second})
	l := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	waiting := newRedisLog(t, c.Addrs(), replay.RedisConfig{WaitReplicas: 1})
	room := redistest.Prefix(t) + ".move"
	seqKey, logKey := "room:{"+room+"}:seq", "room:{"+room+"}:log"
	slot := redistest.Slot(seqKey)
	owner := c.NodeForSlot(t, slot)
	to := otherPrimary(t, c, owner)

	rec := subscribeRec(t, l, room)
	for i := 1; i <= 3; i++ {
		mustAppend(t, l, room, msgN(i))
		rec.untilSeq(t, uint64(i), 5*time.Second)
	}

	t.Run("MOVED", func(t *testing.T) {
		moved := errorCount(t, owner, "MOVED")
		c.MigrateSlot(t, slot, owner, to)
		if ev := mustAppend(t, l, room, msgN(4)); ev.Seq != 4 {
			t.Fatalf("after the move: %+v", ev)
		}
		// The dedicated connection of a WAIT publish does not follow MOVED by
		// itself: the log retries on the new owner.
		if ev := mustAppend(t, waiting, room, msgN(5)); ev.Seq != 5 {
			t.Fatalf("after the move, with WAIT: %+v", ev)
		}
		if got := errorCount(t, owner, "MOVED"); got <= moved {
			t.Fatalf("%s answered MOVED %d times, before %d: the redirect was not exercised", owner.Addr, got, moved)
		}
	})

	t.Run("SunsubscribeOnMove", func(t *testing.T) {
		// The slot move ended the subscription (sunsubscribe); the log subscribed
		// again on the new owner and rang a zero Event.
		rec.zero(t, 20*time.Second)
		if l.Stats().Resubscribes < 1 {
			t.Fatal("no resubscribe counted")
		}
		mustAppend(t, l, room, msgN(6))
		rec.untilSeq(t, 6, 10*time.Second)
		evs, head, err := l.Since(context.Background(), room, replay.Position{}, 100)
		if err != nil || len(evs) != 6 || head.Seq != 6 {
			t.Fatalf("log after the move: %d events, head %v, %v", len(evs), head, err)
		}
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) || ev.Epoch != head.Epoch {
				t.Fatalf("event %d: %+v", i, ev)
			}
		}
	})

	t.Run("IdempotentWhileMigrating", func(t *testing.T) {
		// The slot is MIGRATING but every key of the room is still on its owner. A
		// publish without an idempotency key runs; one with a new key names a key
		// that does not exist yet, which Redis answers with TRYAGAIN (some keys
		// here, one missing) until the migration ends.
		c.BeginMigration(t, slot, to, owner)
		short := newRedisLog(t, c.Addrs(), replay.RedisConfig{Timeout: 300 * time.Millisecond})
		if _, err := short.Append(context.Background(), room, msgN(0)); err != nil {
			t.Fatalf("append while migrating, keys in place: %v", err)
		}
		m := msgN(0)
		m.IdempotencyKey = "fresh"
		if _, err := short.Append(context.Background(), room, m); !errors.Is(err, replay.ErrUnavailable) || !strings.Contains(err.Error(), "TRYAGAIN") {
			t.Fatalf("idempotent append while migrating: %v, want ErrUnavailable after TRYAGAIN", err)
		}
		// Leave the slot open: the next subtest migrates it.
	})

	t.Run("TRYAGAIN", func(t *testing.T) {
		// Move the slot back, leaving its keys split: the log on the new node, the
		// seq hash on the old one.
		c.MigrateKeys(t, slot, to, owner, logKey)
		tryagain := errorCount(t, to, "TRYAGAIN")

		short := newRedisLog(t, c.Addrs(), replay.RedisConfig{Timeout: 300 * time.Millisecond})
		start := time.Now()
		if _, err := short.Append(context.Background(), room, msgN(7)); !errors.Is(err, replay.ErrUnavailable) || !strings.Contains(err.Error(), "TRYAGAIN") {
			t.Fatalf("append with split keys: %v, want ErrUnavailable after TRYAGAIN", err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Fatalf("append took %s with a 300ms timeout", d)
		}
		if _, _, err := short.Since(context.Background(), room, replay.Position{}, 10); !errors.Is(err, replay.ErrUnavailable) {
			t.Fatalf("since with split keys: %v", err)
		}
		if got := errorCount(t, to, "TRYAGAIN"); got <= tryagain {
			t.Fatalf("%s answered TRYAGAIN %d times, before %d", to.Addr, got, tryagain)
		}

		// A publish that keeps retrying succeeds once the migration completes.
		head, err := l.Head(context.Background(), room)
		if err != nil {
			t.Fatal(err)
		}
		patient := newRedisLog(t, c.Addrs(), replay.RedisConfig{Timeout: 20 * time.Second})
		done := make(chan error, 1)
		var ev replay.Event
		go func() {
			var err error
			ev, err = patient.Append(context.Background(), room, msgN(7))
			done <- err
		}()
		replaytest.Eventually(t, 10*time.Second, "a retry", func() error {
			if patient.Stats().Retries == 0 {
				return errors.New("no retry yet")
			}
			return nil
		})
		c.MigrateKeys(t, slot, to, owner)
		c.FinishMigration(t, slot, to, owner)
		select {
		case err := <-done:
			if err != nil || ev.Seq != head.Seq+1 {
				t.Fatalf("append across the migration: %+v %v", ev, err)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("append did not return")
		}
	})
}

func TestRedisManualFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second})
	l := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	waiting := newRedisLog(t, c.Addrs(), replay.RedisConfig{WaitReplicas: 1})
	room := redistest.Prefix(t) + ".failover"
	owner := c.NodeForKey(t, "room:{"+room+"}")
	replicas := c.ReplicasOf(t, owner)
	if len(replicas) == 0 {
		t.Fatal("no replica")
	}

	rec := subscribeRec(t, l, room)
	mustAppend(t, l, room, msgN(1))
	rec.untilSeq(t, 1, 5*time.Second)

	c.Failover(t, replicas[0])
	// The old primary ended the subscription (sunsubscribe); Receive returned and
	// the loop subscribed again, ringing a zero Event.
	rec.zero(t, 20*time.Second)
	if ev := mustAppend(t, l, room, msgN(2)); ev.Seq != 2 {
		t.Fatalf("after failover: %+v", ev)
	}
	rec.untilSeq(t, 2, 10*time.Second)
	if ev := mustAppend(t, waiting, room, msgN(3)); ev.Seq != 3 {
		t.Fatalf("after failover, with WAIT: %+v", ev)
	}
	rec.untilSeq(t, 3, 10*time.Second)
}

func TestRedisPrimaryKilled(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second})
	l := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	p := redistest.Prefix(t)
	room := p + ".kill"
	owner := c.NodeForKey(t, "room:{"+room+"}")
	replica := c.ReplicasOf(t, owner)[0]

	rec := subscribeRec(t, l, room)
	mustAppend(t, l, room, msgN(1))
	rec.untilSeq(t, 1, 5*time.Second)
	// Make sure the replica has seq 1 before the primary dies (replication is
	// asynchronous; an unreplicated event would be lost with it).
	c.WaitReplicated(t, owner)

	t.Run("Resubscribed", func(t *testing.T) {
		c.Kill(t, owner)
		rec.zero(t, 30*time.Second)
		var ev replay.Event
		replaytest.Eventually(t, 20*time.Second, "an append after the failover", func() error {
			var err error
			ev, err = l.Append(context.Background(), room, msgN(2))
			return err
		})
		if ev.Seq != 2 {
			t.Fatalf("after kill -9: %+v", ev)
		}
		rec.untilSeq(t, 2, 10*time.Second)
	})

	t.Run("CLUSTERDOWN", func(t *testing.T) {
		// The shard's last node dies too: no replica can take over, the cluster
		// fails, and every node answers CLUSTERDOWN.
		c.KillNoWait(t, replica)
		c.WaitState(t, "fail")
		var other string
		var otherOwner *redistest.Node
		for i := 0; otherOwner == nil || otherOwner == replica; i++ {
			other = fmt.Sprintf("%s.up%d", p, i)
			otherOwner = c.NodeForKey(t, "room:{"+other+"}")
		}
		down := errorCount(t, otherOwner, "CLUSTERDOWN")
		// The timeout bounds a round trip on a loaded machine (the whole suite runs
		// beside this test); CLUSTERDOWN itself comes back at once, and the append
		// must not retry past a few round trips.
		const timeout = 2 * time.Second
		short := newRedisLog(t, []string{otherOwner.Addr}, replay.RedisConfig{Timeout: timeout})
		start := time.Now()
		_, err := short.Append(context.Background(), other, msgN(1))
		if !errors.Is(err, replay.ErrUnavailable) || !strings.Contains(err.Error(), "CLUSTERDOWN") {
			t.Fatalf("append while the cluster is down: %v, want ErrUnavailable after CLUSTERDOWN", err)
		}
		if d := time.Since(start); d > 2*timeout {
			t.Fatalf("took %s with a %s timeout", d, timeout)
		}
		if got := errorCount(t, otherOwner, "CLUSTERDOWN"); got <= down {
			t.Fatalf("%s answered CLUSTERDOWN %d times, before %d", otherOwner.Addr, got, down)
		}
		if err := short.Ping(context.Background()); err != nil {
			t.Logf("ping while down: %v", err)
		}
	})
}

// TestRedisBlackholedLink: the log's link to Redis drops every byte without a FIN.
// The log must drop the connection on its own (its PINGs go unanswered), well
// before TCP keepalive would (the proxy's kernel answers that), and once the link
// is back subscribe again, ring a zero Event (repair from the log) and take
// Appends.
func TestRedisBlackholedLink(t *testing.T) {
	t.Parallel()
	p := redistest.Proxied(t, redistest.SharedStandalone(t))
	l := newRedisLog(t, []string{p.Addr}, replay.RedisConfig{})
	lost := make(chan time.Time, 1)
	l.ObserveCalls(func(op replay.RedisOp, _ time.Duration, err error) {
		if op == replay.OpSubscribe && err != nil {
			select {
			case lost <- time.Now():
			default:
			}
		}
	})
	room := redistest.Prefix(t) + ".hole"
	rec := subscribeRec(t, l, room)
	mustAppend(t, l, room, msgN(1))
	rec.untilSeq(t, 1, 5*time.Second)

	start := time.Now()
	lift := p.Blackhole(t)
	select {
	case at := <-lost:
		t.Logf("subscription lost %s after the blackhole began (bound %s)", at.Sub(start).Round(time.Millisecond), replay.DetectionBound(0))
	case <-time.After(30 * time.Second):
		t.Fatal("the subscription was not found lost within 30s of a blackhole")
	}
	lift()
	replaytest.Eventually(t, 10*time.Second, "a resubscription", func() bool { return l.Stats().Resubscribes > 0 })
	mustAppend(t, l, room, msgN(2))
	rec.untilSeq(t, 2, 5*time.Second)
}

// TestRedisResetLink: the log's link to Redis is reset (RST) and every new
// connection too, for a while; once it is not, the log subscribes again and takes
// Appends.
func TestRedisResetLink(t *testing.T) {
	t.Parallel()
	p := redistest.Proxied(t, redistest.SharedStandalone(t))
	l := newRedisLog(t, []string{p.Addr}, replay.RedisConfig{})
	lost := make(chan struct{}, 1)
	l.ObserveCalls(func(op replay.RedisOp, _ time.Duration, err error) {
		if op == replay.OpSubscribe && err != nil {
			select {
			case lost <- struct{}{}:
			default:
			}
		}
	})
	room := redistest.Prefix(t) + ".reset"
	rec := subscribeRec(t, l, room)
	mustAppend(t, l, room, msgN(1))
	rec.untilSeq(t, 1, 5*time.Second)

	stop := p.ResetPeer(t, 0)
	// A reset needs no PING to be found: the subscription ends at once (the bound
	// here is for a loaded machine, not a measurement).
	select {
	case <-lost:
	case <-time.After(replay.DetectionBound(0)):
		stop()
		t.Fatal("a reset link was not found before the bound for a silent one")
	}
	stop()
	replaytest.Eventually(t, 10*time.Second, "a resubscription", func() bool { return l.Stats().Resubscribes > 0 })
	mustAppend(t, l, room, msgN(2))
	rec.untilSeq(t, 2, 5*time.Second)
}
