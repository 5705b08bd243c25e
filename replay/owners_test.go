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

// testOwner is the Owner (client, boot, session, pod) with the identity "sub:test".
func testOwner(client, boot, session, pod string) replay.Owner {
	return replay.Owner{Client: client, Boot: boot, Session: session, Pod: pod, Identity: "sub:test"}
}

// memoryOwners opens a MemoryLog on a fake clock; it is both pods.
func memoryOwners(t *testing.T) (*replay.MemoryLog, *replaytest.Clock, replaytest.OwnersEnv) {
	clock := replaytest.NewClock(time.Now())
	l := newMemory(t, replay.MemoryConfig{Now: clock.Now})
	c := controlOf(t, l)
	return l, clock, replaytest.OwnersEnv{
		A: c.Owners, B: c.Owners, NA: c.Notices, NB: c.Notices, Now: clock.Now,
		TTL:  func(_ *testing.T, client string) (time.Duration, bool) { return replay.ClientTTL(l, client) },
		Pass: func(_ *testing.T, d time.Duration) { clock.Advance(d) },
	}
}

func TestMemoryOwners(t *testing.T) {
	replaytest.RunOwners(t, func(t *testing.T) replaytest.OwnersEnv {
		_, _, e := memoryOwners(t)
		return e
	})
}

// redisOwners opens two logs on one Redis (two pods); do runs a command on the node
// that holds a key.
func redisOwners(addrs []string, do func(t *testing.T, key string, args ...string) string) replaytest.OwnersFactory {
	return func(t *testing.T) replaytest.OwnersEnv {
		a := controlOf(t, newRedisLog(t, addrs, replay.RedisConfig{}))
		b := controlOf(t, newRedisLog(t, addrs, replay.RedisConfig{}))
		return replaytest.OwnersEnv{
			A: a.Owners, B: b.Owners, NA: a.Notices, NB: b.Notices,
			Now: time.Now,
			TTL: func(t *testing.T, client string) (time.Duration, bool) {
				key := "room:client:{" + client + "}"
				ms, err := strconv.ParseInt(do(t, key, "PTTL", key), 10, 64)
				if err != nil {
					t.Fatalf("PTTL %s: %v", key, err)
				}
				if ms == -1 {
					t.Fatalf("%s has no TTL", key)
				}
				return time.Duration(ms) * time.Millisecond, ms >= 0
			},
			Pass: passReal,
		}
	}
}

func TestRedisOwnersStandalone(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	replaytest.RunOwners(t, redisOwners(s.Addrs(), func(t *testing.T, _ string, args ...string) string {
		return s.MustDo(t, args...)
	}))
}

func TestRedisOwnersCluster(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	replaytest.RunOwners(t, redisOwners(c.Addrs(), func(t *testing.T, key string, args ...string) string {
		return c.NodeForKey(t, key).MustDo(t, args...)
	}))
}

// TestMemoryOwnersClock: on the log's clock, a refresh carries the entry past its
// first TTL, and after a stale refresh the entry lapses with the new owner's TTL,
// not the stale one's.
func TestMemoryOwnersClock(t *testing.T) {
	ctx := context.Background()
	_, clock, e := memoryOwners(t)
	o := e.A
	old, boot := replay.NewBoot(clock.Now().Add(-time.Minute)), replay.NewBoot(clock.Now())
	if _, err := o.ClaimClient(ctx, testOwner("c1", boot, "sA", "p1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(50 * time.Second)
	if _, err := o.RefreshClient(ctx, testOwner("c1", boot, "sA", "p1"), time.Minute); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	clock.Advance(50 * time.Second)
	if _, ok, _ := o.ClientOwner(ctx, "c1"); !ok {
		t.Fatal("the refreshed entry expired with its first ttl")
	}
	clock.Advance(10*time.Second + time.Millisecond)
	if _, ok, _ := o.ClientOwner(ctx, "c1"); ok {
		t.Fatal("the entry outlived its refreshed ttl")
	}

	if _, err := o.ClaimClient(ctx, testOwner("c2", old, "sA", "p1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ClaimClient(ctx, testOwner("c2", boot, "sB", "p2"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := o.RefreshClient(ctx, testOwner("c2", old, "sA", "p1"), time.Hour); !errors.Is(err, replay.ErrNotOwner) {
		t.Fatalf("stale refresh: %v; want ErrNotOwner", err)
	}
	clock.Advance(10*time.Second - time.Millisecond)
	if o, ok, _ := o.ClientOwner(ctx, "c2"); !ok || o.Session != "sB" {
		t.Fatalf("owner within B's ttl: %+v, %v", o, ok)
	}
	clock.Advance(time.Millisecond)
	if o, ok, _ := o.ClientOwner(ctx, "c2"); ok {
		t.Fatalf("owner at the end of B's ttl: %+v; want none", o)
	}
}

// TestMemoryOwnersBound: 100 000 live entries at most; expired ones make room.
func TestMemoryOwnersBound(t *testing.T) {
	ctx := context.Background()
	_, clock, e := memoryOwners(t)
	o := e.A
	boot := replay.NewBoot(clock.Now())
	const bound = 100000
	for i := range bound {
		if _, err := o.ClaimClient(ctx, testOwner("c"+strconv.Itoa(i), boot, "s", "p"), time.Minute); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	if _, err := o.ClaimClient(ctx, testOwner("one-more", boot, "s", "p"), time.Minute); !errors.Is(err, replay.ErrFull) {
		t.Fatalf("claim beyond the bound: %v; want ErrFull", err)
	}
	if _, err := o.ClaimClient(ctx, testOwner("c7", boot, "s2", "p"), time.Minute); err != nil {
		t.Fatalf("claim of a client held, at the bound: %v", err)
	}
	if err := o.ReleaseClient(ctx, "c0", "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ClaimClient(ctx, testOwner("one-more", boot, "s", "p"), time.Minute); err != nil {
		t.Fatalf("claim after a release made room: %v", err)
	}
	clock.Advance(2 * time.Minute)
	if _, err := o.ClaimClient(ctx, testOwner("after-expiry", boot, "s", "p"), time.Minute); err != nil {
		t.Fatalf("claim once the others expired: %v", err)
	}
}

// TestOwnersClosed: every call after Close is ErrClosed, and Close ends a
// PodNotices with ErrClosed.
func TestOwnersClosed(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	mem := newMemory(t, replay.MemoryConfig{})
	red := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	for name, l := range map[string]replay.Log{"memory": mem, "redis": red} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := controlOf(t, l)
			o, n := c.Owners, c.Notices
			done := make(chan error, 1)
			heard := make(chan struct{}, 1)
			go func() {
				done <- n.PodNotices(ctx, "p1", func(string) {
					select {
					case heard <- struct{}{}:
					default:
					}
				})
			}()
			replaytest.Eventually(t, 20*time.Second, "listening", func() bool {
				_ = n.NotifyPod(ctx, "p1", "hello")
				select {
				case <-heard:
					return true
				default:
					return false
				}
			})
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, replay.ErrClosed) {
					t.Fatalf("PodNotices after Close: %v; want ErrClosed", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("PodNotices did not return after Close")
			}
			boot := replay.NewBoot(time.Now())
			_, err1 := o.ClaimClient(ctx, testOwner("c", boot, "s", "p"), time.Minute)
			_, err2 := o.RefreshClient(ctx, testOwner("c", boot, "s", "p"), time.Minute)
			err3 := o.ReleaseClient(ctx, "c", "s")
			_, _, err4 := o.ClientOwner(ctx, "c")
			err5 := n.NotifyPod(ctx, "p", "n")
			err6 := n.PodNotices(ctx, "p", func(string) {})
			for i, err := range []error{err1, err2, err3, err4, err5, err6} {
				if !errors.Is(err, replay.ErrClosed) {
					t.Errorf("call %d after Close: %v; want ErrClosed", i+1, err)
				}
			}
		})
	}
}

func TestParseBoot(t *testing.T) {
	good := "0190a0b0-c0d0-7abc-9def-0123456789ab"
	cases := []struct {
		name, in, want string
	}{
		{"Canonical", good, good},
		{"UpperCase", strings.ToUpper(good), good},
		{"VariantB", "0190a0b0-c0d0-7abc-bdef-0123456789ab", "0190a0b0-c0d0-7abc-bdef-0123456789ab"},
		{"Empty", "", ""},
		{"Braces", "{" + good + "}", ""},
		{"NoDashes", strings.ReplaceAll(good, "-", ""), ""},
		{"Version4", "0190a0b0-c0d0-4abc-9def-0123456789ab", ""},
		{"VariantC", "0190a0b0-c0d0-7abc-cdef-0123456789ab", ""},
		{"Variant7", "0190a0b0-c0d0-7abc-7def-0123456789ab", ""},
		{"DashMoved", "0190a0b-0c0d0-7abc-9def-0123456789ab", ""},
		{"NotHex", "0190a0b0-c0d0-7abc-9def-0123456789ag", ""},
		{"Space", " 190a0b0-c0d0-7abc-9def-0123456789ab", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replay.ParseBoot(tc.in)
			if tc.want == "" {
				if !errors.Is(err, replay.ErrBadBoot) {
					t.Fatalf("ParseBoot(%q) = %q, %v; want ErrBadBoot", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseBoot(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestNewBoot: a fresh boot parses, carries its millisecond (BootTime), and boots of
// later milliseconds compare newer.
func TestNewBoot(t *testing.T) {
	at := time.UnixMilli(1731312000123)
	b := replay.NewBoot(at)
	if got, err := replay.ParseBoot(b); err != nil || got != b {
		t.Fatalf("ParseBoot(NewBoot) = %q, %v; want %q", got, err, b)
	}
	ms, err := strconv.ParseInt(strings.ReplaceAll(b[:13], "-", ""), 16, 64)
	if err != nil || ms != at.UnixMilli() {
		t.Fatalf("boot %s carries %d ms, want %d", b, ms, at.UnixMilli())
	}
	if got := replay.BootTime(b); !got.Equal(at) {
		t.Fatalf("BootTime(%s) = %s, want %s", b, got, at)
	}
	if far := replay.BootTime("ffffffff-ffff-7fff-bfff-ffffffffffff"); far.UnixMilli() != 1<<48-1 {
		t.Fatalf("BootTime of the largest boot = %s (%d ms), want 2^48-1 ms", far, far.UnixMilli())
	}
	if b2 := replay.NewBoot(at); b2 == b {
		t.Fatalf("two boots of one millisecond are equal: %s", b)
	}
	if later := replay.NewBoot(at.Add(time.Millisecond)); replay.CompareBoots(b, later) != -1 || replay.CompareBoots(later, b) != 1 {
		t.Fatalf("%s is not older than %s", b, later)
	}
}

// FuzzParseBoot: whatever the input, ParseBoot never panics; what it accepts is a
// canonical UUIDv7 it maps to itself, equal to the input but for case, and it
// compares as the 128-bit number it spells.
func FuzzParseBoot(f *testing.F) {
	for _, s := range []string{"0190a0b0-c0d0-7abc-9def-0123456789ab", "0190A0B0-C0D0-7ABC-9DEF-0123456789AB", "", "{}", strings.Repeat("-", 36)} {
		f.Add(s, "0190a0b0-c0d0-7abc-9def-0123456789ac")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		got, err := replay.ParseBoot(s)
		if err != nil {
			if !errors.Is(err, replay.ErrBadBoot) || got != "" {
				t.Fatalf("ParseBoot(%q) = %q, %v", s, got, err)
			}
			return
		}
		if len(got) != 36 || got != strings.ToLower(got) || !strings.EqualFold(got, s) {
			t.Fatalf("ParseBoot(%q) = %q: not the canonical form of the input", s, got)
		}
		if again, err := replay.ParseBoot(got); err != nil || again != got {
			t.Fatalf("ParseBoot(%q) = %q, %v; want itself", got, again, err)
		}
		if got[14] != '7' || !strings.ContainsRune("89ab", rune(got[19])) {
			t.Fatalf("ParseBoot(%q) = %q: not version 7, variant 10", s, got)
		}
		o, err := replay.ParseBoot(other)
		if err != nil {
			return
		}
		hi := func(b string) string { return strings.ReplaceAll(b, "-", "") }
		want := strings.Compare(hi(got), hi(o))
		if c := replay.CompareBoots(got, o); c != want {
			t.Fatalf("CompareBoots(%s, %s) = %d; want %d", got, o, c, want)
		}
	})
}
