package replay_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestMeasureClientSampleCost counts, with ROOMCAST_MEASURE=1, the commands the
// sampler of a log's own connections sends each node per sample (INFO
// commandstats after CONFIG RESETSTAT), and what Redis spent on them, on a standalone
// server and on a 3+3 cluster, with rooms subscribed. Figures are printed, never
// asserted.
func TestMeasureClientSampleCost(t *testing.T) {
	if os.Getenv("ROOMCAST_MEASURE") != "1" {
		t.Skip("a measurement: set ROOMCAST_MEASURE=1")
	}
	const samples = 12
	measure := func(t *testing.T, nodes []*redistest.Node, addrs []string) {
		l := newRedisLog(t, addrs, replay.RedisConfig{PodID: "pod-m", ClientsInterval: 250 * time.Millisecond})
		prefix := redistest.Prefix(t)
		for i := range 30 {
			if err := l.Subscribe(context.Background(), fmt.Sprintf("%s-%d", prefix, i), func(replay.Event) {}); err != nil {
				t.Fatal(err)
			}
		}
		n := replay.ClientSamples(l)
		replaytest.Eventually(t, 5*time.Second, "a sample", func() bool { return replay.ClientSamples(l) > n })
		// The resets take a while (redis-cli per node): the samples counted from
		// before the first may reach a node reset late before its reset.
		n = replay.ClientSamples(l)
		for _, nd := range nodes {
			nd.MustDo(t, "CONFIG", "RESETSTAT")
		}
		replaytest.Eventually(t, 30*time.Second, "samples", func() bool { return replay.ClientSamples(l) >= n+samples })
		last := l.Clients()
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		took := replay.ClientSamples(l) - n
		for _, nd := range nodes {
			stats := nd.MustDo(t, "INFO", "commandstats")
			t.Logf("node %s over %d samples: %s; %s", nd.Addr, took, cmdstat(stats, "client|list"), cmdstat(stats, "cluster|slots"))
		}
		t.Logf("last sample: %+v", last)
	}
	t.Run("standalone", func(t *testing.T) {
		s := redistest.Standalone(t)
		measure(t, []*redistest.Node{s.Node}, s.Addrs())
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, redistest.ClusterConfig{})
		measure(t, c.Nodes(), c.Addrs())
	})
}

// cmdstat is the calls and µs per call of cmd in an INFO commandstats answer.
func cmdstat(info, cmd string) string {
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		f := map[string]string{}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		calls, _ := strconv.Atoi(f["calls"])
		return fmt.Sprintf("%s %d calls, %s µs/call", cmd, calls, f["usec_per_call"])
	}
	return cmd + " 0 calls"
}
