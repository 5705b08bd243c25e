package replay_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestMemoryOccupancy(t *testing.T) {
	replaytest.RunOccupancy(t, func(t *testing.T) replaytest.OccupancyEnv {
		clock := replaytest.NewClock(time.Now())
		l, err := replay.NewMemoryLog(replay.MemoryConfig{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		o := controlOf(t, l).Occupancy
		return replaytest.OccupancyEnv{A: o, B: o, Close: func() error { return l.Close(context.Background()) },
			Pass: func(_ *testing.T, d time.Duration) { clock.Advance(d) }}
	})
}

func redisOccupancy(addrs []string) func(t *testing.T) replaytest.OccupancyEnv {
	return func(t *testing.T) replaytest.OccupancyEnv {
		a := newRedisLog(t, addrs, replay.RedisConfig{})
		b := newRedisLog(t, addrs, replay.RedisConfig{})
		return replaytest.OccupancyEnv{A: controlOf(t, a).Occupancy, B: controlOf(t, b).Occupancy, Pass: passReal,
			Close: func() error { return a.Close(context.Background()) }}
	}
}

func TestRedisOccupancyStandalone(t *testing.T) {
	t.Parallel()
	replaytest.RunOccupancy(t, redisOccupancy(redistest.SharedStandalone(t).Addrs()))
}

func TestRedisOccupancyCluster(t *testing.T) {
	t.Parallel()
	replaytest.RunOccupancy(t, redisOccupancy(redistest.SharedCluster(t).Addrs()))
}

// TestRedisOccupancyKey: a room's records live in one hash in the room's slot, whose
// TTL follows its last record in force; a pod that forgets its last record leaves no
// key behind.
func TestRedisOccupancyKey(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctl := controlOf(t, l)
	ctx := context.Background()
	room := redistest.Prefix(t)
	key := "room:{" + room + "}:pods"
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-a", 10*time.Second, []replay.RoomCount{{Room: room, Members: 4}}); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-b", time.Minute, []replay.RoomCount{{Room: room, Members: 1}}); err != nil {
		t.Fatal(err)
	}
	if ttl, err := strconv.Atoi(s.MustDo(t, "PTTL", key)); err != nil || ttl <= 10000 || ttl > 60000 {
		t.Fatalf("PTTL %s = %d, %v; want the longer record's ttl, above 10s and at most 1m", key, ttl, err)
	}
	v := s.MustDo(t, "HGET", key, "pod-a")
	members, expires, updated, err := replay.ParseOccupancy(v)
	if err != nil || members != 4 || expires-updated != 10000 {
		t.Fatalf("stored record %q: %d members, expires-updated %d, %v", v, members, expires-updated, err)
	}
	for _, pod := range []string{"pod-a", "pod-b"} {
		if err := ctl.Occupancy.SetOccupancy(ctx, pod, time.Minute, []replay.RoomCount{{Room: room, Members: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.MustDo(t, "EXISTS", key); n != "0" {
		t.Fatalf("EXISTS %s = %s after every pod forgot it, want 0", key, n)
	}
}

// TestRedisOccupancyMalformedRecords: records someone else wrote under the room's key
// are input: a malformed one is skipped, never reported, and the next write by a
// pod drops it.
func TestRedisOccupancyMalformedRecords(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctl := controlOf(t, l)
	ctx := context.Background()
	room := redistest.Prefix(t)
	key := "room:{" + room + "}:pods"
	far := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	s.MustDo(t, "HSET", key,
		"forged-1", "lots",
		"forged-2", "-3 "+far+" 1",
		"forged-3", "0 "+far+" 1",
		"has space", "2 "+far+" 1",
		"forged-4", "5 1 1") // expired long ago
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-a", time.Minute, []replay.RoomCount{{Room: room, Members: 2}}); err != nil {
		t.Fatal(err)
	}
	s.MustDo(t, "HSET", key, "forged-5", "x y z")
	pods, err := ctl.Occupancy.Occupancy(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Pod != "pod-a" || pods[0].Members != 2 {
		t.Fatalf("occupancy %+v, want only pod-a with 2", pods)
	}
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-a", time.Minute, []replay.RoomCount{{Room: room, Members: 3}}); err != nil {
		t.Fatal(err)
	}
	if fields := s.MustDo(t, "HKEYS", key); strings.TrimSpace(fields) != "pod-a" {
		t.Fatalf("HKEYS after a write: %v, want the malformed and expired records dropped", fields)
	}
}

// TestRedisOccupancyACL: the occupancy functions run under exactly the documented
// ACL, and Redis refuses none of the commands they run.
func TestRedisOccupancyACL(t *testing.T) {
	t.Parallel()
	srv, cfg := aclStandalone(t)
	l := newRedisLog(t, []string{srv.Addr}, cfg)
	ctl := controlOf(t, l)
	ctx := context.Background()
	room := redistest.Prefix(t) + ".acl"
	for _, n := range []int{3, 0, 2} {
		if err := ctl.Occupancy.SetOccupancy(ctx, "pod-a", time.Minute, []replay.RoomCount{{Room: room, Members: n}}); err != nil {
			t.Fatalf("set %d: %v", n, err)
		}
	}
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-b", time.Millisecond, []replay.RoomCount{{Room: room, Members: 1}}); err != nil {
		t.Fatal(err)
	}
	passReal(t, 5*time.Millisecond)
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-a", time.Minute, []replay.RoomCount{{Room: room, Members: 4}}); err != nil {
		t.Fatal(err) // prunes pod-b's expired record: HDEL under the ACL
	}
	pods, err := ctl.Occupancy.Occupancy(ctx, room)
	if err != nil || len(pods) != 1 || pods[0].Members != 4 {
		t.Fatalf("occupancy: %+v, %v; want pod-a with 4", pods, err)
	}
	refusedNone(t, srv, "the occupancy functions")
}

func FuzzParseOccupancy(f *testing.F) {
	for _, s := range []string{"1 2 1", "12 1700000000000 1699999990000", "0 1 1", "", "1  2 1", "01 2 1",
		"1 2 3", "999999999999999 999999999999999 0", "1 2 1 ", "-1 2 1", "1 2\n1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		members, expires, updated, err := replay.ParseOccupancy(s)
		if err != nil {
			return
		}
		if members < 1 || updated > expires || updated < 0 {
			t.Fatalf("%q: accepted %d %d %d", s, members, expires, updated)
		}
		// What parses is exactly what a pod writes: it prints back the same.
		back := strconv.Itoa(members) + " " + strconv.FormatInt(expires, 10) + " " + strconv.FormatInt(updated, 10)
		if back != s {
			t.Fatalf("%q parsed as %q", s, back)
		}
	})
}

// TestRedisOccupancyReloadsLibrary: a node that lost the library (FUNCTION FLUSH, a
// node replaced) gets it again on the first occupancy call, which then succeeds.
func TestRedisOccupancyReloadsLibrary(t *testing.T) {
	t.Parallel()
	s := redistest.StandaloneWith(t, redistest.Options{})
	l := newRedisLog(t, []string{s.Addr}, replay.RedisConfig{})
	ctl := controlOf(t, l)
	ctx := context.Background()
	room := redistest.Prefix(t)
	s.MustDo(t, "FUNCTION", "FLUSH")
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-a", time.Minute, []replay.RoomCount{{Room: room, Members: 2}, {Room: room + ".b", Members: 1}}); err != nil {
		t.Fatalf("set after FUNCTION FLUSH: %v", err)
	}
	s.MustDo(t, "FUNCTION", "FLUSH")
	if pods, err := ctl.Occupancy.Occupancy(ctx, room); err != nil || len(pods) != 1 || pods[0].Members != 2 {
		t.Fatalf("occupancy after FUNCTION FLUSH: %+v, %v", pods, err)
	}
}

// TestRedisOccupancyAfterAnOlderLibrary: during a rollout an older pod may load its
// roomcast_v1, which lacks the occupancy functions, over the newer one; the next
// occupancy call of a newer pod loads the full library again and succeeds, and the
// older functions keep working throughout.
func TestRedisOccupancyAfterAnOlderLibrary(t *testing.T) {
	t.Parallel()
	s := redistest.StandaloneWith(t, redistest.Options{})
	l := newRedisLog(t, []string{s.Addr}, replay.RedisConfig{})
	ctl := controlOf(t, l)
	loadOlderLibrary(t, s, "occupancy")
	ctx := context.Background()
	room := redistest.Prefix(t)
	mustAppend(t, l, room, msgN(1))
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-new", time.Minute, []replay.RoomCount{{Room: room, Members: 1}}); err != nil {
		t.Fatalf("set over the older library: %v", err)
	}
	mustAppend(t, l, room, msgN(2))
	if pods, err := ctl.Occupancy.Occupancy(ctx, room); err != nil || len(pods) != 1 {
		t.Fatalf("occupancy: %+v, %v", pods, err)
	}
}

// loadOlderLibrary loads over s's library the roomcast library as an older pod has
// it: without the functions whose registration line holds newer.
func loadOlderLibrary(t *testing.T, s *redistest.Server, newer string) {
	t.Helper()
	src, err := os.ReadFile("roomcast.lua")
	if err != nil {
		t.Fatal(err)
	}
	var older []string
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.Contains(line, "register_function") || !strings.Contains(line, newer) {
			older = append(older, line)
		}
	}
	s.MustDo(t, "FUNCTION", "LOAD", "REPLACE", strings.Join(older, "\n"))
	if list := s.MustDo(t, "FUNCTION", "LIST"); strings.Contains(list, newer) || !strings.Contains(list, "roomcast_v1_publish") {
		t.Fatalf("the older library: %s", list)
	}
}
