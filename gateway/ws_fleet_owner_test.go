package gateway_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestWSFleetOwnershipMovesPods: on the Redis Cluster, a client that connects again
// through another pod, with a newer boot, takes ownership there, and its connection
// on the first pod is closed with 4409 by the notice the second pod sends; the
// registry then names the second pod. The claims' TTL is long, so the close cannot
// come from a failed refresh instead.
func TestWSFleetOwnershipMovesPods(t *testing.T) {
	c := redistest.SharedCluster(t)
	pods := map[string]*pod{}
	for _, id := range []string{"own-a", "own-b"} {
		p := newFleetPod(t, c, replay.RedisConfig{}, podConfig{gw: gateway.Config{PodID: id, OwnerTTL: time.Hour}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = p.srv.WatchOwners(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		pods[id] = p
	}
	client := redistest.Prefix(t) + ".rig"
	room := redistest.Prefix(t)

	// A notice is sent once, to whoever listens: wait for both listeners.
	for id := range pods {
		replaytest.Eventually(t, 20*time.Second, id+"'s notice listener subscribed", func() bool {
			return podSubscribers(t, c, id) == 1
		})
	}

	old := dialWS(t, pods["own-a"])
	old.welcome(client, boot1, map[string]string{room: ""})
	moved := dialWS(t, pods["own-b"])
	moved.welcome(client, testBoot(1_700_000_000_500, 2), map[string]string{room: ""})
	old.wantClose(4409)

	l := pods["own-b"].log.(replay.Owners)
	o, ok, err := l.ClientOwner(context.Background(), client)
	if err != nil || !ok || o.Pod != "own-b" {
		t.Fatalf("owner %+v (%v, %v), want pod own-b", o, ok, err)
	}
}

// podSubscribers asks the shard of pod's notice channel how many connections hold it.
func podSubscribers(t *testing.T, c *redistest.Cluster, pod string) int {
	t.Helper()
	ch := "room:pod:{" + pod + "}"
	out := c.NodeForKey(t, ch).MustDo(t, "PUBSUB", "SHARDNUMSUB", ch)
	lines := strings.Fields(out)
	n, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil {
		t.Fatalf("SHARDNUMSUB answered %q", out)
	}
	return n
}
