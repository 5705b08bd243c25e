package replay_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// streamsEnv is a FleetStreams under test and a way to let time pass on its clock.
type streamsEnv struct {
	s    replay.FleetStreams
	pass func(t *testing.T, d time.Duration)
}

// fleetOf reads the records of pods (others sharing the store are left out), as
// "pod=streams", sorted.
func fleetOf(t *testing.T, s replay.FleetStreams, pods ...string) []string {
	t.Helper()
	recs, err := s.Streams(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if slices.Contains(pods, r.Pod) {
			out = append(out, r.Pod+"="+strconv.Itoa(r.Streams))
			if !r.ExpiresAt.After(r.UpdatedAt) {
				t.Errorf("%s: expires %s, not after updated %s", r.Pod, r.ExpiresAt, r.UpdatedAt)
			}
		}
	}
	slices.Sort(out)
	return out
}

// runFleetStreams is the contract of FleetStreams, for every backend: a count of 0
// is a record, a later write replaces an earlier one, records lapse after their
// TTL, a forgotten record is gone at once, and bad arguments are ErrInvalid.
func runFleetStreams(t *testing.T, env func(t *testing.T) streamsEnv) {
	ctx := context.Background()
	e := env(t)
	p := redistest.Prefix(t)
	a, b, c := p+"-a", p+"-b", p+"-c"
	for _, w := range []struct {
		pod string
		n   int
		ttl time.Duration
	}{{a, 12, time.Hour}, {b, 0, time.Hour}, {c, 7, 300 * time.Millisecond}, {a, 10, time.Hour}} {
		if err := e.s.SetStreams(ctx, w.pod, w.n, w.ttl); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fleetOf(t, e.s, a, b, c), []string{a + "=10", b + "=0", c + "=7"}; !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	e.pass(t, 400*time.Millisecond)
	if got, want := fleetOf(t, e.s, a, b, c), []string{a + "=10", b + "=0"}; !slices.Equal(got, want) {
		t.Fatalf("records after c's TTL %v, want %v", got, want)
	}
	if err := e.s.ForgetStreams(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, want := fleetOf(t, e.s, a, b, c), []string{b + "=0"}; !slices.Equal(got, want) {
		t.Fatalf("records after forgetting a %v, want %v", got, want)
	}
	for _, bad := range []struct {
		pod string
		n   int
		ttl time.Duration
	}{{"", 1, time.Hour}, {"has space", 1, time.Hour}, {a, -1, time.Hour}, {a, 1, 0}} {
		if err := e.s.SetStreams(ctx, bad.pod, bad.n, bad.ttl); !errors.Is(err, replay.ErrInvalid) {
			t.Errorf("SetStreams(%q, %d, %s) = %v, want ErrInvalid", bad.pod, bad.n, bad.ttl, err)
		}
	}
}

func TestMemoryFleetStreams(t *testing.T) {
	runFleetStreams(t, func(t *testing.T) streamsEnv {
		clock := replaytest.NewClock(time.Now())
		l, err := replay.NewMemoryLog(replay.MemoryConfig{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		return streamsEnv{s: controlOf(t, l).Streams, pass: func(_ *testing.T, d time.Duration) { clock.Advance(d) }}
	})
}

func TestRedisFleetStreamsStandalone(t *testing.T) {
	t.Parallel()
	runFleetStreams(t, func(t *testing.T) streamsEnv {
		l := newRedisLog(t, redistest.SharedStandalone(t).Addrs(), replay.RedisConfig{})
		return streamsEnv{s: controlOf(t, l).Streams, pass: passReal}
	})
}

func TestRedisFleetStreamsCluster(t *testing.T) {
	t.Parallel()
	runFleetStreams(t, func(t *testing.T) streamsEnv {
		l := newRedisLog(t, redistest.SharedCluster(t).Addrs(), replay.RedisConfig{})
		return streamsEnv{s: controlOf(t, l).Streams, pass: passReal}
	})
}
