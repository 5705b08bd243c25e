package replay_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// podsEnv is what the liveness record tests need of a backend: two pods' stores
// (one store serves both in memory), a way to let time pass on the store's clock,
// and a name prefix unique to the test.
type podsEnv struct {
	A, B   replay.Pods
	Pass   func(t *testing.T, d time.Duration)
	Prefix string
}

// testPod is a record of pod id with instance inst, as a gateway would make it.
func testPod(id, inst string) replay.PodRecord {
	return replay.PodRecord{ID: id, Instance: inst, Host: "host-" + inst, PID: 4242, Started: time.UnixMilli(1_764_600_000_123), Admin: "127.0.0.1:9090"}
}

// runPods is the contract of Pods, the same for every backend.
func runPods(t *testing.T, env func(t *testing.T) podsEnv) {
	ctx := context.Background()
	t.Run("ClaimHolderRelease", func(t *testing.T) {
		e := env(t)
		id := e.Prefix + "-pod"
		a, b := testPod(id, "instA"), testPod(id, "instB")
		if _, ok, err := e.A.PodHolder(ctx, id); ok || err != nil {
			t.Fatalf("holder before any claim: %v, %v", ok, err)
		}
		before := time.Now().Add(-time.Second)
		if _, claimed, err := e.A.ClaimPod(ctx, a, time.Minute); !claimed || err != nil {
			t.Fatalf("first claim: claimed %v, %v", claimed, err)
		}
		got, ok, err := e.B.PodHolder(ctx, id)
		if !ok || err != nil || got.Instance != "instA" || got.Host != a.Host || got.PID != a.PID ||
			!got.Started.Equal(a.Started) || got.Admin != a.Admin || got.ID != id || got.Refreshed.Before(before) {
			t.Fatalf("holder: %+v, %v, %v; want %+v refreshed now", got, ok, err, a)
		}
		// A claim of the same instance extends its own record.
		if _, claimed, err := e.A.ClaimPod(ctx, a, time.Minute); claimed || err != nil {
			t.Fatalf("claim of the holding instance: claimed %v, %v; want an extension", claimed, err)
		}
		// Another instance is refused and told who holds the id.
		holder, claimed, err := e.B.ClaimPod(ctx, b, time.Minute)
		if !errors.Is(err, replay.ErrPodInUse) || claimed || holder.Instance != "instA" || holder.Host != a.Host ||
			holder.PID != a.PID || holder.Admin != a.Admin || !holder.Started.Equal(a.Started) {
			t.Fatalf("claim of another instance: %+v, claimed %v, %v; want ErrPodInUse and %+v", holder, claimed, err, a)
		}
		if !strings.Contains(err.Error(), strconv.Quote(id)) {
			t.Fatalf("error %q does not name the pod id", err)
		}
		// A release by another instance does nothing.
		if err := e.B.ReleasePod(ctx, b); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := e.B.PodHolder(ctx, id); !ok || err != nil || got.Instance != "instA" {
			t.Fatalf("holder after another instance's release: %+v, %v, %v", got, ok, err)
		}
		// The holder's release frees the id at once.
		if err := e.A.ReleasePod(ctx, a); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := e.B.PodHolder(ctx, id); ok || err != nil {
			t.Fatalf("holder after the release: %v, %v", ok, err)
		}
		if _, claimed, err := e.B.ClaimPod(ctx, b, time.Minute); !claimed || err != nil {
			t.Fatalf("claim after the release: claimed %v, %v", claimed, err)
		}
		// Releasing twice is no error.
		if err := e.A.ReleasePod(ctx, a); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("IDsAreIndependent", func(t *testing.T) {
		e := env(t)
		a, b := testPod(e.Prefix+"-a", "instA"), testPod(e.Prefix+"-b", "instB")
		if _, claimed, err := e.A.ClaimPod(ctx, a, time.Minute); !claimed || err != nil {
			t.Fatalf("claim of a: %v, %v", claimed, err)
		}
		if _, claimed, err := e.B.ClaimPod(ctx, b, time.Minute); !claimed || err != nil {
			t.Fatalf("claim of b beside a: %v, %v", claimed, err)
		}
	})
	t.Run("Lapses", func(t *testing.T) {
		// A holder that stops refreshing (it crashed) frees the id after its TTL.
		e := env(t)
		id := e.Prefix + "-pod"
		const ttl = 600 * time.Millisecond
		if _, _, err := e.A.ClaimPod(ctx, testPod(id, "instA"), ttl); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.B.ClaimPod(ctx, testPod(id, "instB"), ttl); !errors.Is(err, replay.ErrPodInUse) {
			t.Fatalf("claim while the record lives: %v", err)
		}
		e.Pass(t, ttl+50*time.Millisecond)
		if _, ok, err := e.B.PodHolder(ctx, id); ok || err != nil {
			t.Fatalf("holder after the TTL: %v, %v", ok, err)
		}
		if _, claimed, err := e.B.ClaimPod(ctx, testPod(id, "instB"), ttl); !claimed || err != nil {
			t.Fatalf("claim after the TTL: claimed %v, %v", claimed, err)
		}
	})
	t.Run("RefreshKeepsAlive", func(t *testing.T) {
		// A holder that refreshes at a third of its TTL keeps the id across several
		// TTLs; each refresh moves Refreshed on.
		e := env(t)
		id := e.Prefix + "-pod"
		const ttl = 900 * time.Millisecond
		a := testPod(id, "instA")
		if _, _, err := e.A.ClaimPod(ctx, a, ttl); err != nil {
			t.Fatal(err)
		}
		first, _, _ := e.A.PodHolder(ctx, id)
		for i := range 12 { // four TTLs
			e.Pass(t, ttl/3)
			if _, claimed, err := e.A.ClaimPod(ctx, a, ttl); claimed || err != nil {
				t.Fatalf("refresh %d: claimed %v, %v; want an extension", i, claimed, err)
			}
			if _, _, err := e.B.ClaimPod(ctx, testPod(id, "instB"), ttl); !errors.Is(err, replay.ErrPodInUse) {
				t.Fatalf("claim of another instance after refresh %d: %v", i, err)
			}
		}
		last, ok, err := e.B.PodHolder(ctx, id)
		if !ok || err != nil || last.Instance != "instA" || !last.Refreshed.After(first.Refreshed) {
			t.Fatalf("holder after the refreshes: %+v, %v, %v; first refreshed %s", last, ok, err, first.Refreshed)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		e := env(t)
		id := e.Prefix + "-pod"
		good := testPod(id, "instA")
		bad := map[string]func(r *replay.PodRecord){
			"ID":       func(r *replay.PodRecord) { r.ID = "a b" },
			"NoID":     func(r *replay.PodRecord) { r.ID = "" },
			"Instance": func(r *replay.PodRecord) { r.Instance = "a.b" },
			"Host":     func(r *replay.PodRecord) { r.Host = "a b" },
			"Admin":    func(r *replay.PodRecord) { r.Admin = strings.Repeat("a", 254) },
			"PID":      func(r *replay.PodRecord) { r.PID = -1 },
			"Started":  func(r *replay.PodRecord) { r.Started = time.Time{} },
		}
		for name, spoil := range bad {
			r := good
			spoil(&r)
			if _, _, err := e.A.ClaimPod(ctx, r, time.Minute); !errors.Is(err, replay.ErrInvalid) {
				t.Errorf("%s: claim answered %v; want ErrInvalid", name, err)
			}
		}
		for _, ttl := range []time.Duration{0, time.Microsecond, 25 * time.Hour} {
			if _, _, err := e.A.ClaimPod(ctx, good, ttl); !errors.Is(err, replay.ErrInvalid) {
				t.Errorf("ttl %s: claim answered %v; want ErrInvalid", ttl, err)
			}
		}
		if _, _, err := e.A.PodHolder(ctx, "a b"); !errors.Is(err, replay.ErrInvalid) {
			t.Errorf("holder of a bad id: %v", err)
		}
		if err := e.A.ReleasePod(ctx, replay.PodRecord{ID: id}); !errors.Is(err, replay.ErrInvalid) {
			t.Errorf("release without an instance: %v", err)
		}
		if _, ok, _ := e.A.PodHolder(ctx, id); ok {
			t.Error("a refused claim left a record")
		}
	})
	t.Run("OptionalFields", func(t *testing.T) {
		e := env(t)
		r := replay.PodRecord{ID: e.Prefix + "-pod", Instance: "instA", Started: time.UnixMilli(1)}
		if _, claimed, err := e.A.ClaimPod(ctx, r, time.Minute); !claimed || err != nil {
			t.Fatalf("claim without host, pid and admin: %v, %v", claimed, err)
		}
		got, ok, err := e.B.PodHolder(ctx, r.ID)
		if !ok || err != nil || got.Host != "" || got.PID != 0 || got.Admin != "" {
			t.Fatalf("holder: %+v, %v, %v", got, ok, err)
		}
		if s := got.String(); !strings.Contains(s, "unknown host") || strings.Contains(s, "admin") {
			t.Fatalf("String() = %q", s)
		}
	})
}

func TestMemoryPods(t *testing.T) {
	runPods(t, func(t *testing.T) podsEnv {
		clock := replaytest.NewClock(time.Now())
		c := controlOf(t, newMemory(t, replay.MemoryConfig{Now: clock.Now}))
		return podsEnv{A: c.Pods, B: c.Pods, Pass: func(_ *testing.T, d time.Duration) { clock.Advance(d) }, Prefix: "p"}
	})
}

// redisPods opens two logs on one Redis: two pods.
func redisPods(addrs []string) func(t *testing.T) podsEnv {
	return func(t *testing.T) podsEnv {
		a := controlOf(t, newRedisLog(t, addrs, replay.RedisConfig{}))
		b := controlOf(t, newRedisLog(t, addrs, replay.RedisConfig{}))
		return podsEnv{A: a.Pods, B: b.Pods, Pass: passReal, Prefix: redistest.Prefix(t)}
	}
}

func TestRedisPodsStandalone(t *testing.T) {
	t.Parallel()
	runPods(t, redisPods(redistest.SharedStandalone(t).Addrs()))
}

func TestRedisPodsCluster(t *testing.T) {
	t.Parallel()
	runPods(t, redisPods(redistest.SharedCluster(t).Addrs()))
}

// TestRedisPodsLayout: a record is the hash room:pod:{<id>}:live with the fields
// the package doc names and the TTL of the last claim; a malformed record is
// reported as none and counted, and a claim takes it over; the functions refuse
// arguments a pod could not have sent and write nothing then.
func TestRedisPodsLayout(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	pods := controlOf(t, l).Pods
	ctx := context.Background()
	id := redistest.Prefix(t) + "-pod"
	key := "room:pod:{" + id + "}:live"
	a := testPod(id, "instA")
	if _, _, err := pods.ClaimPod(ctx, a, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"instance": "instA", "host": "host-instA", "pid": "4242", "started": "1764600000123", "admin": "127.0.0.1:9090"} {
		if got := s.MustDo(t, "HGET", key, field); got != want {
			t.Errorf("HGET %s %s = %q, want %q", key, field, got, want)
		}
	}
	if ms, err := strconv.Atoi(s.MustDo(t, "PTTL", key)); err != nil || ms <= 0 || ms > 30000 {
		t.Fatalf("PTTL %s = %d, %v; want within the claim's 30s", key, ms, err)
	}

	s.MustDo(t, "HSET", key, "pid", "many")
	base := l.Stats().BadOwners
	if _, ok, err := pods.PodHolder(ctx, id); ok || err != nil {
		t.Fatalf("holder of a malformed record: %v, %v", ok, err)
	}
	if got := l.Stats().BadOwners; got != base+1 {
		t.Fatalf("BadOwners %d after a malformed record, want %d", got, base+1)
	}
	// A malformed record of another instance still holds the id.
	if _, _, err := pods.ClaimPod(ctx, testPod(id, "instB"), time.Minute); !errors.Is(err, replay.ErrPodInUse) {
		t.Fatalf("claim over another instance's malformed record: %v", err)
	}
	// One without an instance holds nothing.
	s.MustDo(t, "HDEL", key, "instance")
	if _, claimed, err := pods.ClaimPod(ctx, testPod(id, "instB"), time.Minute); !claimed || err != nil {
		t.Fatalf("claim over a record without an instance: %v, %v", claimed, err)
	}
	if got := s.MustDo(t, "HGET", key, "pid"); got != "4242" {
		t.Fatalf("pid after the claim = %q", got)
	}

	other := "room:pod:{" + id + "-x}:live"
	cases := map[string][]string{
		"RoomKey":     {"FCALL", "roomcast_v1_pod", "1", "room:{r}:seq", "i", "h", "1", "1", "a", "1000"},
		"NoTag":       {"FCALL", "roomcast_v1_pod", "1", "room:pod:x:live", "i", "h", "1", "1", "a", "1000"},
		"Args":        {"FCALL", "roomcast_v1_pod", "1", other, "i", "h", "1", "1", "a"},
		"Instance":    {"FCALL", "roomcast_v1_pod", "1", other, "i.j", "h", "1", "1", "a", "1000"},
		"Host":        {"FCALL", "roomcast_v1_pod", "1", other, "i", "h h", "1", "1", "a", "1000"},
		"PID":         {"FCALL", "roomcast_v1_pod", "1", other, "i", "h", "-1", "1", "a", "1000"},
		"Started":     {"FCALL", "roomcast_v1_pod", "1", other, "i", "h", "1", "0", "a", "1000"},
		"TTL":         {"FCALL", "roomcast_v1_pod", "1", other, "i", "h", "1", "1", "a", "0"},
		"ReleaseArgs": {"FCALL", "roomcast_v1_pod_release", "1", other},
		"ReleaseKey":  {"FCALL", "roomcast_v1_pod_release", "1", "room:client:{c}", "i"},
	}
	for name, args := range cases {
		if out, err := s.Do(args...); err == nil && !strings.Contains(out, "ERR roomcast:") {
			t.Errorf("%s: %v answered %q; want an error", name, args, out)
		}
	}
	if n := s.MustDo(t, "EXISTS", other); n != "0" {
		t.Fatalf("EXISTS %s = %s after refused calls; want 0", other, n)
	}
}

// TestRedisPodsAfterAnOlderLibrary: during a rollout an older pod may load its
// roomcast_v1, which lacks the liveness functions, over this one; the next claim or
// release loads the full library again and succeeds.
func TestRedisPodsAfterAnOlderLibrary(t *testing.T) {
	t.Parallel()
	s := redistest.StandaloneWith(t, redistest.Options{})
	pods := controlOf(t, newRedisLog(t, []string{s.Addr}, replay.RedisConfig{})).Pods
	ctx := context.Background()
	a := testPod(redistest.Prefix(t), "instA")
	loadOlderLibrary(t, s, "_pod")
	if _, claimed, err := pods.ClaimPod(ctx, a, time.Minute); !claimed || err != nil {
		t.Fatalf("claim over the older library: %v, %v", claimed, err)
	}
	loadOlderLibrary(t, s, "_pod")
	if err := pods.ReleasePod(ctx, a); err != nil {
		t.Fatalf("release over the older library: %v", err)
	}
	if _, ok, err := pods.PodHolder(ctx, a.ID); ok || err != nil {
		t.Fatalf("holder after the release: %v, %v", ok, err)
	}
}
