package gateway_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

type addrs []string

func (a addrs) Addrs() []string { return a }

type backendStats struct {
	Backend struct {
		Kind      string
		Up        bool
		ChangedAt time.Time `json:"changed_at"`
	}
}

func statsBackend(t *testing.T, p *pod) backendStats {
	t.Helper()
	var st backendStats
	res := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "")
	if err := json.Unmarshal([]byte(res.body), &st); err != nil || res.status != http.StatusOK {
		t.Fatalf("stats: %d %s", res.status, res.body)
	}
	return st
}

// TestReadinessIgnoresTheBackend: a pod whose Redis is unreachable stays ready (the
// load balancer must not answer new streams with 5xx); it reports the backend down
// in /admin/stats and roomcast_redis_up, turns streams away with 200 and a longer
// retry hint, and refuses publishes with 503. When Redis comes up it serves.
func TestReadinessIgnoresTheBackend(t *testing.T) {
	redistest.Require(t)
	port := redistest.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	pc := podConfig{gw: gateway.Config{RetryMin: time.Second, RetryMax: 2 * time.Second}}
	p := newFleetPod(t, addrs{addr}, replay.RedisConfig{Timeout: 300 * time.Millisecond, HealthInterval: 50 * time.Millisecond}, pc)
	room := redistest.Prefix(t)

	if res := do(t, http.MethodGet, p.public.URL+"/readyz", ""); res.status != http.StatusOK {
		t.Fatalf("readyz with redis down: %d %s", res.status, res.body)
	}
	if st := statsBackend(t, p); st.Backend.Kind != "redis" || st.Backend.Up || st.Backend.ChangedAt.IsZero() {
		t.Fatalf("stats backend with redis down: %+v", st.Backend)
	}
	if m := do(t, http.MethodGet, p.admin.URL+"/metrics", "").body; !strings.Contains(m, "\nroomcast_redis_up 0\n") {
		t.Fatal("metrics lack roomcast_redis_up 0")
	}
	s := p.subscribe(t, room, "")
	frames := s.waitEnd()
	if s.res.StatusCode != http.StatusOK || len(frames) != 1 || frames[0].retry < 2000 || frames[0].hasID {
		t.Fatalf("stream with redis down: %d %+v, want 200, one retry: of at least 2000 and an end", s.res.StatusCode, frames)
	}
	res := do(t, http.MethodPost, p.public.URL+"/rooms/"+room+"/events", `{"i":1}`, "Content-Type", "application/json")
	assertError(t, res, http.StatusServiceUnavailable, "unavailable")
	if res.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}

	redistest.StandaloneAt(t, port)
	replaytest.Eventually(t, 10*time.Second, "the backend is up", func() bool { return statsBackend(t, p).Backend.Up })
	if m := do(t, http.MethodGet, p.admin.URL+"/metrics", "").body; !strings.Contains(m, "\nroomcast_redis_up 1\n") {
		t.Fatal("metrics lack roomcast_redis_up 1")
	}
	s = p.subscribe(t, room, "")
	s.nextAny()
	id := p.publish(t, room, `{"i":2}`)
	if f := s.next(); f.id != id {
		t.Fatalf("event %+v, want %s", f, id)
	}
}

func TestMemoryBackendIsAlwaysUp(t *testing.T) {
	p := newPod(t, podConfig{})
	if st := statsBackend(t, p); st.Backend.Kind != "memory" || !st.Backend.Up {
		t.Fatalf("stats backend: %+v", st.Backend)
	}
	// roomcast_redis_up is a fleet metric: an embedded pod has no Redis to report.
	if m := do(t, http.MethodGet, p.admin.URL+"/metrics", "").body; strings.Contains(m, "roomcast_redis_up") {
		t.Fatal("an embedded pod exports roomcast_redis_up")
	}
}
