package replay_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestRedisOwnerKey: an entry is the hash room:client:{<client>} with exactly boot,
// session, pod, since (Redis's clock, Unix ms) and identity, expiring with the
// claim's TTL.
func TestRedisOwnerKey(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctl := controlOf(t, l)
	client := redistest.Prefix(t) + ":c"
	boot := replay.NewBoot(time.Now())
	before := time.Now().UnixMilli()
	if _, err := ctl.Owners.ClaimClient(context.Background(), testOwner(client, boot, "s1", "pod-1"), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	key := "room:client:{" + client + "}"
	fields := strings.Fields(s.MustDo(t, "HGETALL", key))
	got := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		got[fields[i]] = fields[i+1]
	}
	since, err := strconv.ParseInt(got["since"], 10, 64)
	if len(fields) != 10 || got["boot"] != boot || got["session"] != "s1" || got["pod"] != "pod-1" || got["identity"] != "sub:test" ||
		err != nil || since < before-1000 || since > time.Now().UnixMilli()+1000 {
		t.Fatalf("HGETALL %s = %q", key, fields)
	}
	if ttl, err := strconv.Atoi(s.MustDo(t, "PTTL", key)); err != nil || ttl <= 0 || ttl > 90000 {
		t.Fatalf("PTTL %s = %d, %v", key, ttl, err)
	}
}

// TestRedisOwnerFunctionsValidate: the functions refuse what the Go side would
// never send, before writing anything.
func TestRedisOwnerFunctionsValidate(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	newRedisLog(t, s.Addrs(), replay.RedisConfig{}) // loads the library
	client := redistest.Prefix(t) + ":c"
	key := "room:client:{" + client + "}"
	boot := replay.NewBoot(time.Now())
	cases := []struct {
		name string
		args []string
	}{
		{"RoomKey", []string{"FCALL", "roomcast_v1_claim", "1", "room:{r}:seq", boot, "s", "p", "1000"}},
		{"TwoKeys", []string{"FCALL", "roomcast_v1_claim", "2", key, key, boot, "s", "p", "1000"}},
		{"UpperBoot", []string{"FCALL", "roomcast_v1_claim", "1", key, strings.ToUpper(boot), "s", "p", "1000"}},
		{"Version4", []string{"FCALL", "roomcast_v1_claim", "1", key, boot[:14] + "4" + boot[15:], "s", "p", "1000"}},
		{"VariantC", []string{"FCALL", "roomcast_v1_claim", "1", key, boot[:19] + "c" + boot[20:], "s", "p", "1000"}},
		{"ShortBoot", []string{"FCALL", "roomcast_v1_claim", "1", key, boot[:35], "s", "p", "1000"}},
		{"Session", []string{"FCALL", "roomcast_v1_claim", "1", key, boot, "a.b", "p", "1000"}},
		{"Pod", []string{"FCALL", "roomcast_v1_claim", "1", key, boot, "s", "a b", "1000"}},
		{"ZeroTTL", []string{"FCALL", "roomcast_v1_claim", "1", key, boot, "s", "p", "0"}},
		{"NegativeTTL", []string{"FCALL", "roomcast_v1_claim", "1", key, boot, "s", "p", "-5"}},
		{"ClaimArgs", []string{"FCALL", "roomcast_v1_claim", "1", key, boot, "s", "p"}},
		{"RefreshTTL", []string{"FCALL", "roomcast_v1_refresh", "1", key, "s", "x"}},
		{"RefreshKey", []string{"FCALL", "roomcast_v1_refresh", "1", "room:client:{a}b", "s", "1000"}},
		{"ReleaseSession", []string{"FCALL", "roomcast_v1_release", "1", key, ""}},
		{"ClaimAsArgs", []string{"FCALL", "roomcast_v1_claim_as", "1", key, boot, "s", "p", "1000"}},
		{"ClaimAsIdentity", []string{"FCALL", "roomcast_v1_claim_as", "1", key, boot, "s", "p", "1000", ""}},
		{"ClaimAsLongIdentity", []string{"FCALL", "roomcast_v1_claim_as", "1", key, boot, "s", "p", "1000", strings.Repeat("i", 321)}},
		{"ClaimAsBoot", []string{"FCALL", "roomcast_v1_claim_as", "1", key, strings.ToUpper(boot), "s", "p", "1000", "sub:a"}},
		{"ClaimAsTTL", []string{"FCALL", "roomcast_v1_claim_as", "1", key, boot, "s", "p", "0", "sub:a"}},
		{"ClaimAsKey", []string{"FCALL", "roomcast_v1_claim_as", "1", "room:{r}:seq", boot, "s", "p", "1000", "sub:a"}},
		{"RefreshAsArgs", []string{"FCALL", "roomcast_v1_refresh_as", "1", key, "s", "1000"}},
		{"RefreshAsIdentity", []string{"FCALL", "roomcast_v1_refresh_as", "1", key, boot, "s", "p", "1000", ""}},
		{"RefreshAsSession", []string{"FCALL", "roomcast_v1_refresh_as", "1", key, boot, "a b", "p", "1000", "sub:a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Do(tc.args...)
			if err == nil && !strings.Contains(out, "ERR roomcast:") {
				t.Fatalf("%v answered %q; want an error", tc.args, out)
			}
		})
	}
	if n := s.MustDo(t, "EXISTS", key); n != "0" {
		t.Fatalf("EXISTS %s = %s after refused calls; want 0", key, n)
	}
}

// TestRedisOwnersSkipMalformed: entries and notices that a claim or NotifyPod could
// not have written are counted and ignored, never reported; a malformed boot never
// refuses a claim.
func TestRedisOwnersSkipMalformed(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctl := controlOf(t, l)
	ctx := context.Background()
	boot := replay.NewBoot(time.Now())
	far := "ffffffff-ffff-7fff-bfff-ffffffffffff"
	bad := [][]string{
		{"boot", "not-a-boot", "session", "s", "pod", "p", "since", "1731312000123"},
		{"boot", strings.ToUpper(far), "session", "s", "pod", "p", "since", "1731312000123"},
		{"boot", far, "session", "a b", "pod", "p", "since", "1731312000123"},
		{"boot", far, "session", "s", "pod", "p", "since", "soon"},
		{"session", "s"},
	}
	for i, fields := range bad {
		client := redistest.Prefix(t) + ":c" + strconv.Itoa(i)
		key := "room:client:{" + client + "}"
		s.MustDo(t, append([]string{"HSET", key}, fields...)...)
		base := l.Stats().BadOwners
		if o, ok, err := ctl.Owners.ClientOwner(ctx, client); ok || err != nil {
			t.Fatalf("entry %v: owner %+v, %v, %v; want none", fields, o, ok, err)
		}
		if l.Stats().BadOwners != base+1 {
			t.Fatalf("entry %v: BadOwners %d, want %d", fields, l.Stats().BadOwners, base+1)
		}
		prev, err := ctl.Owners.ClaimClient(ctx, testOwner(client, boot, "s1", "p1"), time.Minute)
		switch {
		case fields[1] == far:
			// A well-formed newer boot refuses, whatever else is wrong.
			if !errors.Is(err, replay.ErrSuperseded) || prev != (replay.Owner{}) {
				t.Fatalf("entry %v: claim %+v, %v; want a zero Owner and ErrSuperseded", fields, prev, err)
			}
		case err != nil || prev != (replay.Owner{}):
			t.Fatalf("entry %v: claim %+v, %v; want a zero Owner", fields, prev, err)
		default:
			if o, ok, err := ctl.Owners.ClientOwner(ctx, client); !ok || err != nil || o.Session != "s1" || o.Boot != boot {
				t.Fatalf("entry %v: after the claim %+v, %v, %v", fields, o, ok, err)
			}
		}
	}

	// A malformed notice: counted, not delivered; the marker after it is.
	pod := "malformed-" + strconv.Itoa(int(time.Now().UnixNano()%1e6))
	ch, _ := listenNotices(t, l, pod)
	replaytest.Eventually(t, 20*time.Second, "listening", func() bool {
		_ = ctl.Notices.NotifyPod(ctx, pod, "hello")
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})
	base := l.Stats().BadOwners
	s.MustDo(t, "SPUBLISH", "room:pod:{"+pod+"}", "close x\ny")
	if err := ctl.Notices.NotifyPod(ctx, pod, "marker"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for marker := false; !marker; {
		select {
		case n := <-ch:
			if n != "hello" && n != "marker" {
				t.Fatalf("notice %q delivered", n)
			}
			marker = n == "marker"
		case <-timeout:
			t.Fatal("the marker notice was not delivered within 20s")
		}
	}
	if got := l.Stats().BadOwners; got != base+1 {
		t.Fatalf("BadOwners %d after a malformed notice; want %d", got, base+1)
	}
}

// listenNotices runs PodNotices of l's notices for pod until stop is called or the test ends;
// stop returns once PodNotices has.
func listenNotices(t *testing.T, l replay.Log, pod string) (notices <-chan string, stop func()) {
	ctl := controlOf(t, l)
	n := ctl.Notices
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan string, 1024)
	done := make(chan error, 1)
	go func() {
		done <- n.PodNotices(ctx, pod, func(notice string) {
			select {
			case ch <- notice:
			default:
			}
		})
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("pod notices: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("PodNotices did not return within 20s of its context's end")
		}
	})
	t.Cleanup(stop)
	return ch, stop
}

// TestRedisPodNoticesResubscribe: a listener whose connection is lost subscribes
// again, and later notices reach it.
func TestRedisPodNoticesResubscribe(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t)
	a := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctlA := controlOf(t, a)
	b := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctx := context.Background()
	ch, stop := listenNotices(t, b, "pod-1")
	heard := func(want string) func() bool {
		return func() bool {
			_ = ctlA.Notices.NotifyPod(ctx, "pod-1", want)
			for {
				select {
				case n := <-ch:
					if n == want {
						return true
					}
				default:
					return false
				}
			}
		}
	}
	replaytest.Eventually(t, 20*time.Second, "listening", heard("before"))
	if n := s.MustDo(t, "CLIENT", "KILL", "TYPE", "pubsub"); n != "1" {
		t.Fatalf("CLIENT KILL TYPE pubsub killed %s connections, want 1", n)
	}
	replaytest.Eventually(t, 20*time.Second, "listening again", heard("after"))
	// Its end unsubscribes on the server too.
	if n := s.MustDo(t, "PUBSUB", "SHARDNUMSUB", "room:pod:{pod-1}"); !strings.HasSuffix(n, "\n1") {
		t.Fatalf("PUBSUB SHARDNUMSUB = %q while listening; want 1 subscriber", n)
	}
	stop()
	replaytest.Eventually(t, 20*time.Second, "unsubscribed", func() bool {
		return strings.HasSuffix(s.MustDo(t, "PUBSUB", "SHARDNUMSUB", "room:pod:{pod-1}"), "\n0")
	})
}

// TestRedisOwnersAcrossARollout: pods of an older version call roomcast_v1_claim and
// roomcast_v1_refresh, which know no identity, and may load their library (without
// claim_as and refresh_as) over this one. A claim of this version then loads the full
// library again; an entry an older pod wrote binds no identity, so any identity may
// take it over by the boot rule; the older refresh keeps working on this version's
// entries.
func TestRedisOwnersAcrossARollout(t *testing.T) {
	t.Parallel()
	s := redistest.StandaloneWith(t, redistest.Options{})
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctl := controlOf(t, l)
	loadOlderLibrary(t, s, "_as'")
	if list := s.MustDo(t, "FUNCTION", "LIST"); strings.Contains(list, "claim_as") || !strings.Contains(list, "roomcast_v1_claim") {
		t.Fatalf("the older library: %s", list)
	}
	ctx := context.Background()
	client := redistest.Prefix(t) + ":c"
	key := "room:client:{" + client + "}"
	old, boot := replay.NewBoot(time.Now().Add(-time.Minute)), replay.NewBoot(time.Now())

	// An older pod claims: no identity.
	s.MustDo(t, "FCALL", "roomcast_v1_claim", "1", key, old, "sOld", "pod-old", "60000")
	if o, ok, err := ctl.Owners.ClientOwner(ctx, client); err != nil || !ok || o.Session != "sOld" || o.Identity != "" {
		t.Fatalf("the older pod's entry: %+v, %v, %v", o, ok, err)
	}
	// This version's claim loads claim_as again and takes the entry over.
	prev, err := ctl.Owners.ClaimClient(ctx, replay.Owner{Client: client, Boot: boot, Session: "sNew", Pod: "pod-new", Identity: "sub:ana"}, time.Minute)
	if err != nil || prev.Session != "sOld" {
		t.Fatalf("claim over the older library and entry: %+v, %v", prev, err)
	}
	// The older pod's refresh, on this version's entry.
	if n := s.MustDo(t, "FCALL", "roomcast_v1_refresh", "1", key, "sNew", "60000"); n != "1" {
		t.Fatalf("the older refresh of the owner answered %s, want 1", n)
	}
	if o, ok, err := ctl.Owners.ClientOwner(ctx, client); err != nil || !ok || o.Session != "sNew" || o.Identity != "sub:ana" {
		t.Fatalf("owner: %+v, %v, %v", o, ok, err)
	}
}
