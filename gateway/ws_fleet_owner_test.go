package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
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

	l := control(t, pods["own-b"].log).Owners
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

// watchOwners serves p's pod notices until the test ends.
func watchOwners(t *testing.T, p *pod) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.srv.WatchOwners(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestWSFleetClientIDAttack is the attack across two pods on the Redis Cluster: an
// agent holds its client id on pod own-a with a token for user-a; on pod own-b an
// anonymous connection names the same id with the largest UUIDv7 (4400), then with
// a valid boot (4401), and a token for user-b with a newer boot (4403, compared in
// Redis, logged with both identities). The agent stays connected and served, and the
// registry still names it, with its identity.
func TestWSFleetClientIDAttack(t *testing.T) {
	c := redistest.SharedCluster(t)
	keys := gatewaytest.NewKeys(t)
	logger, logs := captureLog()
	a := newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{PodID: "own-a", OwnerTTL: time.Hour, Logger: logger})
	b := newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{PodID: "own-b", OwnerTTL: time.Hour, Logger: logger})
	watchOwners(t, a.pod)
	watchOwners(t, b.pod)
	client := redistest.Prefix(t) + ".agent"
	room := "public." + redistest.Prefix(t)
	rooms := map[string]string{room: ""}

	agent := dialWS(t, a.pod, "Authorization", "Bearer "+a.agentToken(t, "user-a", nil))
	w := agent.welcome(client, replay.NewBoot(time.Now()), rooms)

	anon := dialWS(t, b.pod)
	anon.hello(client, bootFar, rooms)
	anon.wantClose(4400)
	anon = dialWS(t, b.pod)
	anon.hello(client, replay.NewBoot(time.Now()), rooms)
	anon.wantClose(4401)
	other := dialWS(t, b.pod, "Authorization", "Bearer "+b.agentToken(t, "user-b", nil))
	other.hello(client, replay.NewBoot(time.Now()), rooms)
	other.wantClose(4403)
	wantLogged(t, logs, "websocket client closed", map[string]string{
		"code": "4403", "client": client, "identity": "sub:user-b", "pod": "own-b",
		"owner_identity": "sub:user-a", "owner_pod": "own-a"})

	status, ci := b.client(t, client)
	if status != http.StatusOK || ci.Local || ci.Pod != "own-a" || ci.Session != w.Session || ci.Identity != "sub:user-a" {
		t.Fatalf("pod own-b's view of the agent: %d %+v", status, ci)
	}
	id := postAs(t, b, room, `"still here"`)
	if m := agent.next(); m.Kind != "event" || m.ID != id {
		t.Fatalf("the agent got %+v, want event %s", m, id)
	}
}

// TestWSRefreshAfterRedisLostItsData: Redis restarts without its data while a client
// is connected. The owner's next refresh finds no entry and claims the client again
// (it is no takeover): the connection stays open and the new Redis names it.
func TestWSRefreshAfterRedisLostItsData(t *testing.T) {
	port := redistest.FreePort(t)
	s := redistest.StandaloneAt(t, port)
	p := newFleetPod(t, s, replay.RedisConfig{Timeout: 300 * time.Millisecond, HealthInterval: 50 * time.Millisecond},
		podConfig{gw: gateway.Config{PodID: "lost-a", OwnerTTL: 300 * time.Millisecond}})
	c := dialWS(t, p)
	w := c.welcome("rig-lost", boot1, map[string]string{"lost": ""})
	l := control(t, p.log).Owners
	if o, ok, err := l.ClientOwner(context.Background(), "rig-lost"); err != nil || !ok || o.Session != w.Session {
		t.Fatalf("owner before the restart: %+v, %v, %v", o, ok, err)
	}

	_, _ = s.Do("SHUTDOWN", "NOSAVE")
	redistest.StandaloneAt(t, port)
	replaytest.Eventually(t, 20*time.Second, "the client claimed again on the new Redis", func() error {
		o, ok, err := l.ClientOwner(context.Background(), "rig-lost")
		if err != nil || !ok || o.Session != w.Session {
			return fmt.Errorf("owner %+v, %v, %v", o, ok, err)
		}
		return nil
	})
	// Still open: it answers a ping.
	c.send(`{"v":1,"kind":"ping","data":1}`)
	if m := c.next(); m.Kind != "pong" {
		t.Fatalf("after the restart the client got %+v, want a pong", m)
	}
}
