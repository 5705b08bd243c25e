package replaytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// OccupancyEnv is one backend for the occupancy suite: two handles on one store (two
// pods' logs on one Redis; for memory, the same log twice), closed by the caller's
// cleanup, and Pass, which lets d pass on the backend's clock and returns once it
// has.
type OccupancyEnv struct {
	A, B replay.Occupancy
	Pass func(t *testing.T, d time.Duration)
	// Close closes A; the suite checks that a closed store refuses calls.
	Close func() error
}

// RunOccupancy runs the contract suite of replay.Occupancy against a backend.
func RunOccupancy(t *testing.T, open func(t *testing.T) OccupancyEnv) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e OccupancyEnv)
	}{
		{"PodsSeeEachOther", occPodsSeeEachOther},
		{"LatestCountWins", occLatestCountWins},
		{"ZeroForgetsAtOnce", occZeroForgets},
		{"RecordsExpire", occRecordsExpire},
		{"BatchOverRooms", occBatch},
		{"UnknownRoom", occUnknownRoom},
		{"Validates", occValidates},
		{"Closed", occClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func setOcc(t *testing.T, o replay.Occupancy, pod string, ttl time.Duration, counts ...replay.RoomCount) {
	t.Helper()
	if err := o.SetOccupancy(context.Background(), pod, ttl, counts); err != nil {
		t.Fatalf("set occupancy of %s: %v", pod, err)
	}
}

// occOf returns room's records as "pod=members" sorted, checking each record's times.
func occOf(t *testing.T, o replay.Occupancy, room string) string {
	t.Helper()
	pods, err := o.Occupancy(context.Background(), room)
	if err != nil {
		t.Fatalf("occupancy %s: %v", room, err)
	}
	var out []string
	for _, p := range pods {
		if p.UpdatedAt.IsZero() || !p.UpdatedAt.Before(p.ExpiresAt) {
			t.Fatalf("record %+v: updated %s, expires %s", p, p.UpdatedAt, p.ExpiresAt)
		}
		out = append(out, fmt.Sprintf("%s=%d", p.Pod, p.Members))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func occPodsSeeEachOther(t *testing.T, e OccupancyEnv) {
	r, other := room(t), room(t)
	setOcc(t, e.A, "pod-a", time.Hour, replay.RoomCount{Room: r, Members: 3})
	setOcc(t, e.B, "pod-b", time.Hour, replay.RoomCount{Room: r, Members: 5}, replay.RoomCount{Room: other, Members: 1})
	for _, o := range []replay.Occupancy{e.A, e.B} {
		if got := occOf(t, o, r); got != "pod-a=3,pod-b=5" {
			t.Fatalf("room: %q, want pod-a=3,pod-b=5", got)
		}
		if got := occOf(t, o, other); got != "pod-b=1" {
			t.Fatalf("other room: %q, want pod-b=1", got)
		}
	}
	pods, _ := e.A.Occupancy(context.Background(), r)
	for _, p := range pods {
		if ttl := p.ExpiresAt.Sub(p.UpdatedAt); ttl != time.Hour {
			t.Fatalf("record %+v: expires %s after its update, want 1h", p, ttl)
		}
		if d := time.Since(p.UpdatedAt); d < -time.Minute || d > time.Minute {
			t.Fatalf("record %+v: updated %s ago", p, d)
		}
	}
}

func occLatestCountWins(t *testing.T, e OccupancyEnv) {
	r := room(t)
	setOcc(t, e.A, "pod-a", time.Hour, replay.RoomCount{Room: r, Members: 3})
	setOcc(t, e.A, "pod-a", time.Hour, replay.RoomCount{Room: r, Members: 7})
	if got := occOf(t, e.B, r); got != "pod-a=7" {
		t.Fatalf("%q, want pod-a=7", got)
	}
}

func occZeroForgets(t *testing.T, e OccupancyEnv) {
	r := room(t)
	setOcc(t, e.A, "pod-a", time.Hour, replay.RoomCount{Room: r, Members: 3})
	setOcc(t, e.B, "pod-b", time.Hour, replay.RoomCount{Room: r, Members: 2})
	setOcc(t, e.A, "pod-a", time.Hour, replay.RoomCount{Room: r, Members: 0})
	if got := occOf(t, e.B, r); got != "pod-b=2" {
		t.Fatalf("after pod-a's 0: %q, want pod-b=2", got)
	}
	setOcc(t, e.B, "pod-b", time.Hour, replay.RoomCount{Room: r, Members: 0})
	setOcc(t, e.B, "pod-b", time.Hour, replay.RoomCount{Room: r, Members: 0}) // forgetting twice is fine
	if got := occOf(t, e.A, r); got != "" {
		t.Fatalf("after both 0: %q, want none", got)
	}
}

func occRecordsExpire(t *testing.T, e OccupancyEnv) {
	r := room(t)
	setOcc(t, e.A, "pod-short", 300*time.Millisecond, replay.RoomCount{Room: r, Members: 1})
	setOcc(t, e.B, "pod-long", time.Hour, replay.RoomCount{Room: r, Members: 2})
	if got := occOf(t, e.B, r); got != "pod-long=2,pod-short=1" {
		t.Fatalf("before the ttl: %q", got)
	}
	e.Pass(t, 400*time.Millisecond)
	if got := occOf(t, e.B, r); got != "pod-long=2" {
		t.Fatalf("after the ttl: %q, want pod-long=2", got)
	}
}

func occBatch(t *testing.T, e OccupancyEnv) {
	var counts []replay.RoomCount
	for i := range 50 {
		counts = append(counts, replay.RoomCount{Room: room(t), Members: i + 1})
	}
	setOcc(t, e.A, "pod-a", time.Hour, counts...)
	for _, c := range counts {
		if got, want := occOf(t, e.B, c.Room), fmt.Sprintf("pod-a=%d", c.Members); got != want {
			t.Fatalf("room %s: %q, want %q", c.Room, got, want)
		}
	}
	if err := e.A.SetOccupancy(context.Background(), "pod-a", time.Hour, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}

func occUnknownRoom(t *testing.T, e OccupancyEnv) {
	if got := occOf(t, e.A, room(t)); got != "" {
		t.Fatalf("a room nobody holds: %q", got)
	}
}

func occValidates(t *testing.T, e OccupancyEnv) {
	ctx := context.Background()
	r := room(t)
	ok := []replay.RoomCount{{Room: r, Members: 1}}
	big := make([]replay.RoomCount, replay.MaxOccupancyBatch+1)
	for i := range big {
		big[i] = replay.RoomCount{Room: r, Members: 1}
	}
	cases := []struct {
		name   string
		pod    string
		ttl    time.Duration
		counts []replay.RoomCount
	}{
		{"empty pod", "", time.Hour, ok},
		{"pod with a space", "a b", time.Hour, ok},
		{"pod too long", strings.Repeat("p", replay.MaxPodIDLen+1), time.Hour, ok},
		{"ttl below 1ms", "pod", time.Microsecond, ok},
		{"bad room", "pod", time.Hour, []replay.RoomCount{{Room: "a{b}", Members: 1}}},
		{"negative members", "pod", time.Hour, []replay.RoomCount{{Room: r, Members: -1}}},
		{"batch too large", "pod", time.Hour, big},
	}
	for _, c := range cases {
		if err := e.A.SetOccupancy(ctx, c.pod, c.ttl, c.counts); !errors.Is(err, replay.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	if got := occOf(t, e.B, r); got != "" {
		t.Fatalf("after refused calls: %q, want none", got)
	}
	if _, err := e.A.Occupancy(ctx, "a:b"); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("occupancy of a bad room: %v, want ErrInvalid", err)
	}
}

func occClosed(t *testing.T, e OccupancyEnv) {
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	r := room(t)
	if err := e.A.SetOccupancy(context.Background(), "pod", time.Hour, []replay.RoomCount{{Room: r, Members: 1}}); !errors.Is(err, replay.ErrClosed) {
		t.Errorf("set after close: %v, want ErrClosed", err)
	}
	if _, err := e.A.Occupancy(context.Background(), r); !errors.Is(err, replay.ErrClosed) {
		t.Errorf("occupancy after close: %v, want ErrClosed", err)
	}
}
