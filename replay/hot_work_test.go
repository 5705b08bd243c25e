package replay_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// shardWork is what one primary did during a run.
type shardWork struct {
	addr       string
	deliveries int   // doorbell messages pushed to subscribers (publishes × SHARDNUMSUB)
	out        int64 // total_net_output_bytes: replies and pushes to clients
	repl       int64 // total_net_repl_output_bytes: the replication stream
	spublish   int64 // cmdstat_spublish calls
}

func nodeCounters(t *testing.T, n *redistest.Node) (out, repl, spublish int64) {
	t.Helper()
	st, err := n.Info("stats")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := n.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	out, _ = strconv.ParseInt(st["total_net_output_bytes"], 10, 64)
	repl, _ = strconv.ParseInt(st["total_net_repl_output_bytes"], 10, 64)
	if v, ok := cs["cmdstat_spublish"]; ok {
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		spublish, _ = strconv.ParseInt(calls, 10, 64)
	}
	return out, repl, spublish
}

// TestRedisHotRoomShardWork measures the per-shard delivery work of one room that 12
// pods follow, with and without partitioning, on a cluster of its own. It checks the
// shape (without, one shard delivers every doorbell; with, the busiest shard sends
// fewer bytes) and logs the table deploy/README.md quotes; it asserts no speed.
func TestRedisHotRoomShardWork(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterConfig{})
	primaries := c.Primaries(t)
	const k, pods, n = 4, 12, 400
	// A room whose sub-channels cover every primary, so that the table shows the
	// spread rather than the luck of four hashes.
	var room string
	for i := 0; room == ""; i++ {
		r := fmt.Sprintf("%s.r%d", redistest.Prefix(t), i)
		on := map[string]bool{}
		for p := range k {
			on[c.NodeForKey(t, replay.HotChannel(r, p)).Addr] = true
		}
		if len(on) == len(primaries) {
			room = r
		}
	}
	ids := podsPerPartition(k, pods/k)
	body := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)

	run := func(hot bool) []shardWork {
		var logs []*replay.RedisLog
		var recs []*ringRecorder
		for i := range pods {
			cfg := replay.RedisConfig{}
			if hot {
				cfg = replay.RedisConfig{HotRooms: []string{room}, HotPartitions: k, PodID: ids[i%k][i/k], HotCheckInterval: time.Hour}
			}
			l := newRedisLog(t, c.Addrs(), cfg)
			logs = append(logs, l)
			recs = append(recs, subscribeRec(t, l, room))
		}
		// Channels and their subscribers, per primary.
		channels := []string{"room:{" + room + "}"}
		for p := range k {
			channels = append(channels, replay.HotChannel(room, p))
		}
		work := make([]shardWork, len(primaries))
		for i, pn := range primaries {
			work[i].addr = pn.Addr
			for _, ch := range channels {
				if c.NodeForKey(t, ch) == pn {
					work[i].deliveries += n * shardNumSub(t, pn, ch)
				}
			}
			work[i].out, work[i].repl, work[i].spublish = nodeCounters(t, pn)
		}
		for range n {
			mustAppend(t, logs[0], room, replay.Message{Body: body})
		}
		for _, r := range recs {
			r.recvSeqs(t, n)
		}
		for i, pn := range primaries {
			out, repl, sp := nodeCounters(t, pn)
			work[i].out, work[i].repl, work[i].spublish = out-work[i].out, repl-work[i].repl, sp-work[i].spublish
		}
		for _, l := range logs {
			l.Close(t.Context())
		}
		for _, ch := range channels {
			replaytest.Eventually(t, 10*time.Second, ch+" has no subscriber left", func() bool {
				return shardNumSub(t, c.NodeForKey(t, ch), ch) == 0
			})
		}
		return work
	}
	without := run(false)
	with := run(true)

	var b strings.Builder
	fmt.Fprintf(&b, "%d pods on one room, %d publishes of %d bytes, %d partitions\n", pods, n, len(body), k)
	fmt.Fprintf(&b, "%-10s %-16s %10s %12s %12s %9s\n", "", "primary", "deliveries", "out bytes", "repl bytes", "spublish")
	line := func(name string, w []shardWork) {
		for _, s := range w {
			fmt.Fprintf(&b, "%-10s %-16s %10d %12d %12d %9d\n", name, s.addr, s.deliveries, s.out, s.repl, s.spublish)
		}
	}
	line("without", without)
	line("with", with)
	maxOut := func(w []shardWork) int64 {
		return slices.MaxFunc(w, func(a, b shardWork) int { return int(a.out - b.out) }).out
	}
	minOut := func(w []shardWork) int64 {
		return slices.MinFunc(w, func(a, b shardWork) int { return int(a.out - b.out) }).out
	}
	fmt.Fprintf(&b, "out bytes max/min per primary: without %d/%d, with %d/%d\n", maxOut(without), minOut(without), maxOut(with), minOut(with))
	t.Log("\n" + b.String())

	var busy int
	for _, s := range without {
		if s.deliveries > 0 {
			busy++
			if s.deliveries != n*pods {
				t.Errorf("without partitions, %s delivered %d, want %d", s.addr, s.deliveries, n*pods)
			}
		}
	}
	if busy != 1 {
		t.Errorf("without partitions, %d primaries delivered, want 1", busy)
	}
	total := 0
	for _, s := range with {
		total += s.deliveries
		if s.deliveries > n*pods/2 {
			t.Errorf("with partitions, %s delivered %d of %d", s.addr, s.deliveries, n*pods)
		}
	}
	if total != n*pods {
		t.Errorf("with partitions, %d deliveries, want %d", total, n*pods)
	}
	if maxOut(with) >= maxOut(without) {
		t.Errorf("the busiest primary sent %d bytes with partitions, %d without", maxOut(with), maxOut(without))
	}
}
