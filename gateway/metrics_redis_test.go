package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestMetricsRedis provokes every Redis metric on a pod over a standalone server of
// its own: calls by op, a subscription killed (resubscribe, and the doorbell repair
// it needs), and the server stopped (redis_up 0, call errors).
func TestMetricsRedis(t *testing.T) {
	srv := redistest.Standalone(t)
	p := newFleetPod(t, srv, replay.RedisConfig{Timeout: 500 * time.Millisecond, HealthInterval: 50 * time.Millisecond}, podConfig{})
	room := redistest.Prefix(t)
	const dur, errs = "roomcast_redis_call_duration_seconds_count", "roomcast_redis_call_errors_total"

	before := p.metrics(t)
	if before.Value("roomcast_redis_up") != 1 {
		t.Fatalf("roomcast_redis_up %v, want 1", before.Value("roomcast_redis_up"))
	}
	s := p.subscribe(t, room, "")
	s.nextAny()
	p.publish(t, room, `{"i":1}`)
	s.next()
	r := p.subscribe(t, room, "", "Last-Event-ID", "0")
	if f := r.next(); f.seq(t) != 1 {
		t.Fatalf("replayed %+v", f)
	}
	replaytest.Eventually(t, 10*time.Second, "a health check observed", func() bool {
		return p.metrics(t).Value(dur, "op", "health") > before.Value(dur, "op", "health")
	})
	after := p.metrics(t)
	for _, op := range []string{"publish", "since", "subscribe"} {
		if after.Value(dur, "op", op) <= before.Value(dur, "op", op) {
			t.Errorf("%s{op=%q} did not move", dur, op)
		}
		moved(t, before, after, 0, errs, "op", op)
	}

	// A killed subscription connection: the pod subscribes again and repairs the
	// room from the log.
	before = after
	srv.MustDo(t, "CLIENT", "KILL", "TYPE", "pubsub")
	replaytest.Eventually(t, 20*time.Second, "the room resubscribed", func() bool {
		return p.metrics(t).Value("roomcast_redis_resubscribes_total") > before.Value("roomcast_redis_resubscribes_total")
	})
	// The zero ring the resubscribe rang started a repair; an event after it is
	// delivered, so the repair has run.
	p.publish(t, room, `{"i":2}`)
	s.next()
	after = p.metrics(t)
	if after.Value("roomcast_doorbell_repairs_total") <= before.Value("roomcast_doorbell_repairs_total") {
		t.Error("roomcast_doorbell_repairs_total did not move after the resubscribe")
	}
	if after.Value(errs, "op", "subscribe") <= before.Value(errs, "op", "subscribe") {
		t.Errorf("%s{op=subscribe} did not move when the subscription's connection was killed", errs)
	}

	// Redis gone: up turns 0, and the health check and a publish count errors.
	before = after
	_, _ = srv.Do("SHUTDOWN", "NOSAVE")
	replaytest.Eventually(t, 10*time.Second, "roomcast_redis_up 0", func() bool {
		return p.metrics(t).Value("roomcast_redis_up") == 0
	})
	res := do(t, http.MethodPost, p.public.URL+"/rooms/"+room+"/events", `{"i":3}`, "Content-Type", "application/json")
	if res.status != http.StatusServiceUnavailable {
		t.Fatalf("publish with redis down: %d %s", res.status, res.body)
	}
	after = p.metrics(t)
	for _, op := range []string{"health", "publish"} {
		if after.Value(errs, "op", op) <= before.Value(errs, "op", op) {
			t.Errorf("%s{op=%q} did not move with redis down", errs, op)
		}
	}
	if statsBackend(t, p).Backend.Up {
		t.Error("stats backend up with redis down")
	}
}

// TestMetricsRedisSubscriberConnections: the pod's own subscriber connections,
// as Redis lists them, on /metrics: none down before a stream, up once a room is
// subscribed, and up again, with a resubscribe counted, after Redis closed them.
// (Up counts every connection of the pod's with a subscription: the pod's notice
// channels may hold one beside the room's.)
func TestMetricsRedisSubscriberConnections(t *testing.T) {
	srv := redistest.Standalone(t)
	p := newFleetPod(t, srv, replay.RedisConfig{PodID: "pod-a", ClientsInterval: 50 * time.Millisecond}, podConfig{})
	const conns = "roomcast_redis_subscriber_connections"
	m := p.metrics(t)
	if _, ok := m[gatewaytest.SampleKey(conns, "state", "down")]; !ok || m.Value(conns, "state", "down") != 0 {
		t.Fatalf("nothing subscribed, and %s{state=down} is %v (exported: %v)", conns, m.Value(conns, "state", "down"), ok)
	}
	room := redistest.Prefix(t)
	s := p.subscribe(t, room, "")
	s.nextAny()
	replaytest.Eventually(t, 10*time.Second, conns+"{state=up} at least 1", func() bool {
		m := p.metrics(t)
		return m.Value(conns, "state", "up") >= 1 && m.Value(conns, "state", "down") == 0 &&
			m.Value("roomcast_redis_subscriber_memory_bytes") > 0
	})
	if out := srv.MustDo(t, "CLIENT", "LIST", "TYPE", "pubsub"); !strings.Contains(out, " name=roomcast:pod-a ") {
		t.Fatalf("Redis lists no pubsub connection named roomcast:pod-a:\n%s", out)
	}
	before := p.metrics(t)
	srv.MustDo(t, "CLIENT", "KILL", "TYPE", "pubsub")
	replaytest.Eventually(t, 10*time.Second, "resubscribed, and the connection up again", func() bool {
		m := p.metrics(t)
		return m.Value("roomcast_redis_resubscribes_total") > before.Value("roomcast_redis_resubscribes_total") &&
			m.Value(conns, "state", "up") >= 1 && m.Value(conns, "state", "down") == 0
	})
	p.publish(t, room, `{"i":1}`)
	s.next()
}

// TestMemoryPodHasNoRedisMetrics: roomcast_redis_* are fleet metrics only.
func TestMemoryPodHasNoRedisMetrics(t *testing.T) {
	p := newPod(t, podConfig{})
	for _, name := range metricFamilies(t, p.admin.URL+"/metrics") {
		if strings.HasPrefix(name, "roomcast_redis_") {
			t.Errorf("memory pod exports %s", name)
		}
	}
}

// metricFamilies lists the families of one scrape of url, sorted.
func metricFamilies(t *testing.T, url string) []string {
	t.Helper()
	names, err := gatewaytest.ScrapeFamilies(context.Background(), http.DefaultClient, url)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestAgreedMetricFamilies lists the families on /metrics of a fleet pod and of an
// embedded one, with nothing provoked, and fails on any agreed name missing or any
// removed name present. (The Go collector's families are cmd/gateway's: see its
// TestFleetPodExportsAgreedMetrics.)
func TestAgreedMetricFamilies(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	fleet := newFleetPod(t, srv, replay.RedisConfig{}, podConfig{})
	mem := newPod(t, podConfig{})
	roomcast := slices.DeleteFunc(slices.Clone(gatewaytest.FleetMetrics), func(n string) bool { return !strings.HasPrefix(n, "roomcast_") })
	embedded := slices.DeleteFunc(slices.Clone(roomcast), func(n string) bool { return slices.Contains(gatewaytest.RedisMetrics, n) })
	for _, c := range []struct {
		name string
		p    *pod
		want []string
	}{
		{"fleet", fleet, roomcast},
		{"embedded", mem, append(embedded, gatewaytest.EmbeddedMetrics...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			have := metricFamilies(t, c.p.admin.URL+"/metrics")
			for _, n := range c.want {
				if !slices.Contains(have, n) {
					t.Errorf("missing %s", n)
				}
			}
			for _, n := range gatewaytest.RemovedMetrics {
				if slices.Contains(have, n) {
					t.Errorf("still exports %s", n)
				}
			}
			if t.Failed() {
				t.Logf("families: %v", have)
			}
		})
	}
}
