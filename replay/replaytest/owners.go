package replaytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// OwnersEnv is one backend for RunOwners: two handles on one shared registry and
// two on the pods' notices (two pods of a fleet; for memory, the same log's twice)
// and the backend's clock.
type OwnersEnv struct {
	A, B replay.Owners
	// NA and NB carry pod notices beside A and B.
	NA, NB replay.Notices
	// Now reads the clock the backend stamps claims with (Owner.Since).
	Now func() time.Time
	// TTL returns how long client's entry has left, as the backend counts it;
	// false when there is none.
	TTL func(t *testing.T, client string) (time.Duration, bool)
	// Pass lets d pass on the backend's clock and returns once it has.
	Pass func(t *testing.T, d time.Duration)
}

// OwnersFactory opens a fresh OwnersEnv; the test's cleanup closes it.
type OwnersFactory func(t *testing.T) OwnersEnv

// RunOwners runs the contract suite of replay.Owners and replay.Notices.
func RunOwners(t *testing.T, open OwnersFactory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e OwnersEnv)
	}{
		{"FirstClaim", firstClaim},
		{"NewerBootTakesOver", newerBootTakesOver},
		{"EqualBootTakesOver", equalBootTakesOver},
		{"OlderBootRefused", olderBootRefused},
		{"BootOrder", bootOrder},
		{"OtherIdentityRefused", otherIdentityRefused},
		{"OtherIdentityAfterRelease", otherIdentityAfterRelease},
		{"RefreshExtends", refreshExtends},
		{"RefreshClaimsAgain", refreshClaimsAgain},
		{"RefreshByDisplacedSession", refreshByDisplacedSession},
		{"StaleRefreshAfterTakeover", staleRefreshAfterTakeover},
		{"Expiry", expiry},
		{"ReleaseOnlyByOwner", releaseOnlyByOwner},
		{"ConcurrentClaims", concurrentClaims},
		{"Validates", ownersValidate},
		{"PodNotices", podNotices},
		{"Receipts", receipts},
		{"ReceiptsRoomBound", receiptsRoomBound},
		{"ReceiptsValidate", receiptsValidate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// client returns a client id no other test uses.
func client(t *testing.T) string { return redistest.Prefix(t) + ":c" }

var podSeq atomic.Int64

// pod returns a pod id no other test uses whose hash slot differs from avoid's
// (a client id), so that on a cluster its notice channel is not in the slot of the
// client's key.
func pod(avoid string) string {
	for {
		p := fmt.Sprintf("pod-%d-%d", os.Getpid()%100000, podSeq.Add(1))
		if redistest.Slot("{"+p+"}") != redistest.Slot("{"+avoid+"}") {
			return p
		}
	}
}

// boots returns n boots made in increasing milliseconds: each newer than the last.
func boots(n int) []string {
	base := time.Now().Add(-time.Hour)
	out := make([]string, n)
	for i := range out {
		out[i] = replay.NewBoot(base.Add(time.Duration(i) * time.Second))
	}
	return out
}

// idA and idB are two identities; the suite claims as idA unless it says otherwise.
const (
	idA = "sub:ana"
	idB = "sub:bob"
)

// own is the Owner (client, boot, session, pod) with identity idA.
func own(client, boot, session, pod string) replay.Owner {
	return replay.Owner{Client: client, Boot: boot, Session: session, Pod: pod, Identity: idA}
}

func mustClaim(t *testing.T, o replay.Owners, client, boot, session, pod string, ttl time.Duration) replay.Owner {
	t.Helper()
	prev, err := o.ClaimClient(context.Background(), own(client, boot, session, pod), ttl)
	if err != nil {
		t.Fatalf("claim %s by %s/%s: %v", client, session, boot, err)
	}
	return prev
}

// refresh refreshes client's claim by session (boot and pod of its claim).
func refresh(o replay.Owners, client, boot, session, pod string, ttl time.Duration) (bool, error) {
	return o.RefreshClient(context.Background(), own(client, boot, session, pod), ttl)
}

// mustOwner returns client's owner as o reports it, failing t when there is none.
func mustOwner(t *testing.T, o replay.Owners, client string) replay.Owner {
	t.Helper()
	got, ok, err := o.ClientOwner(context.Background(), client)
	if err != nil || !ok {
		t.Fatalf("client owner of %s: %+v, %v, %v; want one", client, got, ok, err)
	}
	return got
}

// ownedBy checks that client's owner is session with boot and pod, as idA.
func ownedBy(t *testing.T, o replay.Owners, client, boot, session, pod string) replay.Owner {
	t.Helper()
	got := mustOwner(t, o, client)
	if got.Client != client || got.Boot != boot || got.Session != session || got.Pod != pod || got.Identity != idA {
		t.Fatalf("owner of %s = %+v; want boot %s, session %s, pod %s, identity %s", client, got, boot, session, pod, idA)
	}
	return got
}

// ttlAtMost checks that client's entry has a TTL of at most max (and some left).
func ttlAtMost(t *testing.T, e OwnersEnv, client string, max time.Duration) {
	t.Helper()
	ttl, ok := e.TTL(t, client)
	if !ok || ttl <= 0 || ttl > max {
		t.Fatalf("ttl of %s = %s (%v); want above 0 and at most %s", client, ttl, ok, max)
	}
}

func firstClaim(t *testing.T, e OwnersEnv) {
	c, b := client(t), boots(1)[0]
	p := pod(c)
	before := e.Now().Truncate(time.Millisecond)
	if prev := mustClaim(t, e.A, c, b, "sessA", p, time.Minute); prev != (replay.Owner{}) {
		t.Fatalf("first claim displaced %+v; want none", prev)
	}
	got := ownedBy(t, e.B, c, b, "sessA", p)
	if got.Since.Before(before.Add(-time.Second)) || got.Since.After(e.Now().Add(time.Second)) {
		t.Fatalf("since %s; want about %s", got.Since, before)
	}
	if got.Since.Nanosecond()%int(time.Millisecond) != 0 {
		t.Fatalf("since %s: want millisecond precision", got.Since)
	}
	ttlAtMost(t, e, c, time.Minute)
	if _, ok, err := e.A.ClientOwner(context.Background(), client(t)); ok || err != nil {
		t.Fatalf("owner of a client never claimed: %v, %v", ok, err)
	}
}

func newerBootTakesOver(t *testing.T, e OwnersEnv) {
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.A, c, bs[0], "sessA", pA, time.Minute)
	a := ownedBy(t, e.A, c, bs[0], "sessA", pA)
	if prev := mustClaim(t, e.B, c, bs[1], "sessB", pB, time.Minute); prev != a {
		t.Fatalf("takeover displaced %+v; want %+v", prev, a)
	}
	ownedBy(t, e.A, c, bs[1], "sessB", pB)
}

func equalBootTakesOver(t *testing.T, e OwnersEnv) {
	c, b := client(t), boots(1)[0]
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.A, c, b, "sessA", pA, time.Minute)
	a := ownedBy(t, e.B, c, b, "sessA", pA)
	// The same process reconnects through another pod.
	if prev := mustClaim(t, e.B, c, b, "sessB", pB, time.Minute); prev != a {
		t.Fatalf("reconnect displaced %+v; want %+v", prev, a)
	}
	ownedBy(t, e.A, c, b, "sessB", pB)
}

func olderBootRefused(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.B, c, bs[1], "sessB", pB, time.Minute)
	b := ownedBy(t, e.A, c, bs[1], "sessB", pB)
	holder, err := e.A.ClaimClient(ctx, own(c, bs[0], "sessA", pA), time.Hour)
	if !errors.Is(err, replay.ErrSuperseded) || holder != b {
		t.Fatalf("claim by an older boot: %+v, %v; want %+v, ErrSuperseded", holder, err, b)
	}
	if got := mustOwner(t, e.B, c); got != b {
		t.Fatalf("the refused claim changed the entry: %+v; want %+v", got, b)
	}
	ttlAtMost(t, e, c, time.Minute)
}

func bootOrder(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c := client(t)
	p := pod(c)
	// One millisecond, and the rest decides; upper case is the same boot.
	older := "0190a0b0-c0d0-7fff-bfff-ffffffffffff"
	newer := "0190a0b0-c0d1-7000-8000-000000000000"
	newest := "0190a0b0-c0d1-7000-8000-000000000001"
	mustClaim(t, e.A, c, newer, "s1", p, time.Minute)
	if _, err := e.A.ClaimClient(ctx, own(c, older, "s2", p), time.Minute); !errors.Is(err, replay.ErrSuperseded) {
		t.Fatalf("claim by the boot a millisecond older: %v; want ErrSuperseded", err)
	}
	mustClaim(t, e.B, c, newest, "s3", p, time.Minute)
	if _, err := e.A.ClaimClient(ctx, own(c, newer, "s4", p), time.Minute); !errors.Is(err, replay.ErrSuperseded) {
		t.Fatalf("claim by a boot of the same millisecond, lower after it: %v; want ErrSuperseded", err)
	}
	mustClaim(t, e.A, c, strings.ToUpper(newest), "s5", p, time.Minute)
	ownedBy(t, e.B, c, newest, "s5", p)
}

// otherIdentityRefused: while an entry lives, a claim by another identity is refused,
// whatever its boot, and changes nothing; the same identity still takes over.
func otherIdentityRefused(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c, bs := client(t), boots(3)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.A, c, bs[0], "sessA", pA, time.Minute)
	a := ownedBy(t, e.B, c, bs[0], "sessA", pA)
	for _, boot := range []string{bs[0], bs[1], "ffffffff-ffff-7fff-bfff-ffffffffffff"} {
		holder, err := e.B.ClaimClient(ctx, replay.Owner{Client: c, Boot: boot, Session: "sessB", Pod: pB, Identity: idB}, time.Hour)
		if !errors.Is(err, replay.ErrOtherIdentity) || holder != a {
			t.Fatalf("claim by another identity with boot %s: %+v, %v; want %+v, ErrOtherIdentity", boot, holder, err, a)
		}
	}
	if got := mustOwner(t, e.A, c); got != a {
		t.Fatalf("the refused claims changed the entry: %+v; want %+v", got, a)
	}
	ttlAtMost(t, e, c, time.Minute)
	// An older boot of idA meets the newer boot first.
	if _, err := e.B.ClaimClient(ctx, own(c, "0190a0b0-c0d0-7abc-9def-0123456789ab", "sessC", pB), time.Minute); !errors.Is(err, replay.ErrSuperseded) {
		t.Fatalf("claim by an older boot of the same identity: %v; want ErrSuperseded", err)
	}
	if prev := mustClaim(t, e.B, c, bs[2], "sessC", pB, time.Minute); prev != a {
		t.Fatalf("takeover by the same identity displaced %+v; want %+v", prev, a)
	}
	ownedBy(t, e.A, c, bs[2], "sessC", pB)
}

// otherIdentityAfterRelease: the binding lasts as long as the entry: once released,
// another identity may claim the client, and then holds it.
func otherIdentityAfterRelease(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.A, c, bs[1], "sessA", pA, time.Minute)
	if err := e.A.ReleaseClient(ctx, c, "sessA"); err != nil {
		t.Fatal(err)
	}
	b := replay.Owner{Client: c, Boot: bs[0], Session: "sessB", Pod: pB, Identity: idB}
	if prev, err := e.B.ClaimClient(ctx, b, time.Minute); err != nil || prev != (replay.Owner{}) {
		t.Fatalf("claim by another identity after the release: %+v, %v", prev, err)
	}
	if _, err := e.A.ClaimClient(ctx, own(c, bs[1], "sessA", pA), time.Minute); !errors.Is(err, replay.ErrOtherIdentity) {
		t.Fatalf("claim by the first identity now: %v; want ErrOtherIdentity", err)
	}
}

// refreshClaimsAgain: a refresh that finds no entry (it expired, or the store lost
// it) claims the client again for its session; one that finds another session's
// entry changes nothing.
func refreshClaimsAgain(t *testing.T, e OwnersEnv) {
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	before := e.Now().Truncate(time.Millisecond)
	if claimed, err := refresh(e.A, c, bs[1], "sessA", pA, time.Minute); err != nil || !claimed {
		t.Fatalf("refresh of a client nobody owns: %v, %v; want claimed", claimed, err)
	}
	got := ownedBy(t, e.B, c, bs[1], "sessA", pA)
	if got.Since.Before(before.Add(-time.Second)) {
		t.Fatalf("since %s; want about %s", got.Since, before)
	}
	ttlAtMost(t, e, c, time.Minute)
	if claimed, err := refresh(e.A, c, bs[1], "sessA", pA, time.Minute); err != nil || claimed {
		t.Fatalf("refresh by the owner: %v, %v; want an extension", claimed, err)
	}
	// A refresh from a session that is not the owner, even of a newer boot, never
	// takes the client.
	if _, err := refresh(e.B, c, "ffffffff-ffff-7fff-bfff-ffffffffffff", "sessB", pB, time.Hour); !errors.Is(err, replay.ErrNotOwner) {
		t.Fatalf("refresh by another session: %v; want ErrNotOwner", err)
	}
	if got := mustOwner(t, e.A, c); got.Session != "sessA" {
		t.Fatalf("owner after another session's refresh: %+v", got)
	}
	ttlAtMost(t, e, c, time.Minute)
}

func refreshExtends(t *testing.T, e OwnersEnv) {
	c, b := client(t), boots(1)[0]
	p := pod(c)
	mustClaim(t, e.A, c, b, "sessA", p, time.Minute)
	ttlAtMost(t, e, c, time.Minute)
	if claimed, err := refresh(e.B, c, b, "sessA", p, time.Hour); err != nil || claimed {
		t.Fatalf("refresh by the owner: %v, %v; want an extension", claimed, err)
	}
	if ttl, ok := e.TTL(t, c); !ok || ttl <= time.Minute || ttl > time.Hour {
		t.Fatalf("ttl after a refresh for an hour: %s (%v)", ttl, ok)
	}
	ownedBy(t, e.A, c, b, "sessA", p)
}

func refreshByDisplacedSession(t *testing.T, e OwnersEnv) {
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.A, c, bs[0], "sessA", pA, time.Minute)
	mustClaim(t, e.B, c, bs[1], "sessB", pB, time.Minute)
	b := ownedBy(t, e.A, c, bs[1], "sessB", pB)
	if _, err := refresh(e.A, c, bs[0], "sessA", pA, time.Hour); !errors.Is(err, replay.ErrNotOwner) {
		t.Fatalf("refresh by the displaced session: %v; want ErrNotOwner", err)
	}
	if got := mustOwner(t, e.B, c); got != b {
		t.Fatalf("after the displaced refresh: %+v; want %+v", got, b)
	}
	ttlAtMost(t, e, c, time.Minute)
}

// staleRefreshAfterTakeover forces the race of a stale refresh: session A claims,
// A's refresher finds A still the owner, session B (a newer boot) takes over, and
// only then does A's refresh land. A check-then-extend refresh would extend B's
// entry with A's TTL, or write A back; the registry refuses it.
func staleRefreshAfterTakeover(t *testing.T, e OwnersEnv) {
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.A, c, bs[0], "sessA", pA, time.Minute)
	// 1. A's refresher reads the entry: A owns it.
	ownedBy(t, e.A, c, bs[0], "sessA", pA)
	// 2. B takes over before A's refresh lands.
	mustClaim(t, e.B, c, bs[1], "sessB", pB, 30*time.Second)
	b := ownedBy(t, e.B, c, bs[1], "sessB", pB)
	// 3. A's refresh lands, asking for an hour.
	if _, err := refresh(e.A, c, bs[0], "sessA", pA, time.Hour); !errors.Is(err, replay.ErrNotOwner) {
		t.Fatalf("stale refresh after the takeover: %v; want ErrNotOwner", err)
	}
	if got := mustOwner(t, e.A, c); got != b {
		t.Fatalf("owner after the stale refresh: %+v; want %+v", got, b)
	}
	// B's TTL, not A's hour.
	ttlAtMost(t, e, c, 30*time.Second)
}

func expiry(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.B, c, bs[1], "sessB", pB, 100*time.Millisecond)
	e.Pass(t, 200*time.Millisecond)
	if got, ok, err := e.A.ClientOwner(ctx, c); ok || err != nil {
		t.Fatalf("owner after the ttl: %+v, %v, %v; want none", got, ok, err)
	}
	if ttl, ok := e.TTL(t, c); ok {
		t.Fatalf("entry still there with ttl %s", ttl)
	}
	// An older boot, and another identity, may claim it now.
	other := replay.Owner{Client: c, Boot: bs[0], Session: "sessA", Pod: pA, Identity: idB}
	if prev, err := e.A.ClaimClient(ctx, other, time.Minute); err != nil || prev != (replay.Owner{}) {
		t.Fatalf("claim after expiry: %+v, %v; want none displaced", prev, err)
	}
	if got := mustOwner(t, e.B, c); got.Session != "sessA" || got.Identity != idB {
		t.Fatalf("owner after the claim: %+v", got)
	}
	if _, err := refresh(e.B, c, bs[1], "sessB", pB, time.Minute); !errors.Is(err, replay.ErrNotOwner) {
		t.Fatalf("refresh by the expired owner after another claimed: %v; want ErrNotOwner", err)
	}
}

func releaseOnlyByOwner(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c, bs := client(t), boots(2)
	pA, pB := pod(c), pod(c)
	mustClaim(t, e.A, c, bs[0], "sessA", pA, time.Minute)
	mustClaim(t, e.B, c, bs[1], "sessB", pB, time.Minute)
	b := ownedBy(t, e.A, c, bs[1], "sessB", pB)
	// The displaced connection closes and releases: B keeps the client.
	if err := e.A.ReleaseClient(ctx, c, "sessA"); err != nil {
		t.Fatalf("release by a non-owner: %v", err)
	}
	if got := mustOwner(t, e.B, c); got != b {
		t.Fatalf("after a release by a non-owner: %+v; want %+v", got, b)
	}
	ttlAtMost(t, e, c, time.Minute)
	if err := e.B.ReleaseClient(ctx, c, "sessB"); err != nil {
		t.Fatalf("release by the owner: %v", err)
	}
	if got, ok, err := e.A.ClientOwner(ctx, c); ok || err != nil {
		t.Fatalf("owner after its release: %+v, %v, %v; want none", got, ok, err)
	}
	if err := e.B.ReleaseClient(ctx, c, "sessB"); err != nil {
		t.Fatalf("release of a released client: %v", err)
	}
	if prev := mustClaim(t, e.A, c, bs[0], "sessC", pA, time.Minute); prev != (replay.Owner{}) {
		t.Fatalf("claim after release displaced %+v; want none", prev)
	}
}

// concurrentClaims: boots claiming at once, from both handles, in any order; the
// newest ends up the owner, and every claim either won or met a newer boot.
func concurrentClaims(t *testing.T, e OwnersEnv) {
	const n = 16
	c, bs := client(t), boots(n)
	p := pod(c)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		o := []replay.Owners{e.A, e.B}[i%2]
		wg.Go(func() {
			<-start
			_, errs[i] = o.ClaimClient(context.Background(), own(c, bs[i], fmt.Sprintf("s%d", i), p), time.Minute)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, replay.ErrSuperseded) {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	if errs[n-1] != nil {
		t.Fatalf("the newest boot's claim: %v; want success", errs[n-1])
	}
	ownedBy(t, e.A, c, bs[n-1], fmt.Sprintf("s%d", n-1), p)
}

func ownersValidate(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c, b := client(t), boots(1)[0]
	p := pod(c)
	badBoots := []struct{ name, boot string }{
		{"Empty", ""},
		{"Short", b[:35]},
		{"Long", b + "0"},
		{"Version4", b[:14] + "4" + b[15:]},
		{"VariantC", b[:19] + "c" + b[20:]},
		{"Variant0", b[:19] + "0" + b[20:]},
		{"NotHex", b[:30] + "g" + b[31:]},
		{"NoDash", b[:8] + "0" + b[9:]},
		{"Braces", "{" + b[1:35] + "}"},
	}
	for _, tc := range badBoots {
		t.Run("Boot"+tc.name, func(t *testing.T) {
			if _, err := e.A.ClaimClient(ctx, own(c, tc.boot, "s", p), time.Minute); !errors.Is(err, replay.ErrBadBoot) {
				t.Fatalf("claim with boot %q: %v; want ErrBadBoot", tc.boot, err)
			}
		})
	}
	long := strings.Repeat
	claims := []struct {
		name, client, session, pod, identity string
		ttl                                  time.Duration
	}{
		{"EmptyClient", "", "s", p, idA, time.Minute},
		{"BraceClient", "a{b}", "s", p, idA, time.Minute},
		{"SpaceClient", "a b", "s", p, idA, time.Minute},
		{"LongClient", long("c", 129), "s", p, idA, time.Minute},
		{"EmptySession", c, "", p, idA, time.Minute},
		{"DotSession", c, "a.b", p, idA, time.Minute},
		{"LongSession", c, long("s", 65), p, idA, time.Minute},
		{"EmptyPod", c, "s", "", idA, time.Minute},
		{"SpacePod", c, "s", "a b", idA, time.Minute},
		{"LongPod", c, "s", long("p", replay.MaxPodIDLen+1), idA, time.Minute},
		{"EmptyIdentity", c, "s", p, "", time.Minute},
		{"LongIdentity", c, "s", p, long("i", replay.MaxIdentityLen+1), time.Minute},
		{"NotUTF8Identity", c, "s", p, "sub:\xff", time.Minute},
		{"ZeroTTL", c, "s", p, idA, 0},
		{"SubMillisecondTTL", c, "s", p, idA, time.Microsecond},
		{"HugeTTL", c, "s", p, idA, replay.MaxOwnerTTL + time.Millisecond},
	}
	for _, tc := range claims {
		o := replay.Owner{Client: tc.client, Boot: b, Session: tc.session, Pod: tc.pod, Identity: tc.identity}
		t.Run("Claim"+tc.name, func(t *testing.T) {
			if _, err := e.A.ClaimClient(ctx, o, tc.ttl); !errors.Is(err, replay.ErrInvalid) {
				t.Fatalf("claim: %v; want ErrInvalid", err)
			}
		})
		t.Run("Refresh"+tc.name, func(t *testing.T) {
			if _, err := e.A.RefreshClient(ctx, o, tc.ttl); !errors.Is(err, replay.ErrInvalid) {
				t.Fatalf("refresh: %v; want ErrInvalid", err)
			}
		})
	}
	if _, ok, err := e.B.ClientOwner(ctx, c); ok || err != nil {
		t.Fatalf("a refused claim made an entry: %v, %v", ok, err)
	}
	mustClaim(t, e.A, c, b, long("s", 64), long("p", replay.MaxPodIDLen), replay.MaxOwnerTTL)
	ownedBy(t, e.B, c, b, long("s", 64), long("p", replay.MaxPodIDLen))
	longClient := c + long("x", replay.MaxClientLen-len(c))
	mustClaim(t, e.A, longClient, b, "s", p, time.Minute)
	ownedBy(t, e.B, longClient, b, "s", p)
	// The longest identity, of any UTF-8.
	longID := replay.Owner{Client: c + "i", Boot: b, Session: "s", Pod: p, Identity: "sub:é\n" + long("i", replay.MaxIdentityLen-7)}
	if _, err := e.A.ClaimClient(ctx, longID, time.Minute); err != nil {
		t.Fatalf("claim by the longest identity: %v", err)
	}
	if got := mustOwner(t, e.B, longID.Client); got.Identity != longID.Identity {
		t.Fatalf("identity %q read back as %q", longID.Identity, got.Identity)
	}
	if err := e.A.ReleaseClient(ctx, c, "a b"); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("release by a bad session: %v; want ErrInvalid", err)
	}
	if _, _, err := e.A.ClientOwner(ctx, "a}b"); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("owner of a bad client: %v; want ErrInvalid", err)
	}
	for _, n := range []string{"", "a\nb", "a\rb", "nul\x00", "é", long("n", replay.MaxNoticeLen+1)} {
		if err := e.NA.NotifyPod(ctx, p, n); !errors.Is(err, replay.ErrInvalid) {
			t.Errorf("notice %q: %v; want ErrInvalid", n, err)
		}
	}
	if err := e.NA.NotifyPod(ctx, "a b", "close"); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("notice to a bad pod: %v; want ErrInvalid", err)
	}
	if err := e.NA.PodNotices(ctx, "a b", func(string) {}); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("notices of a bad pod: %v; want ErrInvalid", err)
	}
}

// listen runs o.PodNotices for pod until the test ends, sending every notice to the
// returned channel; stop ends it and returns what PodNotices returned.
func listen(t *testing.T, o replay.Notices, pod string) (notices <-chan string, stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan string, 1024)
	done := make(chan error, 1)
	go func() {
		done <- o.PodNotices(ctx, pod, func(n string) {
			select {
			case ch <- n:
			default: // a test that lets 1024 pile up has failed already
			}
		})
	}()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			return errors.New("PodNotices did not return within 20s of its context's end")
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return ch, stop
}

// awaitListening sends hello notices to pod until one arrives: nothing announces
// that a listener is subscribed, and notices sent before are lost.
func awaitListening(t *testing.T, o replay.Notices, pod string, ch <-chan string) {
	t.Helper()
	i := 0
	Eventually(t, 20*time.Second, "pod "+pod+" listening", func() error {
		i++
		if err := o.NotifyPod(context.Background(), pod, fmt.Sprintf("hello %d", i)); err != nil {
			return err
		}
		select {
		case <-ch:
			return nil
		default:
			return errors.New("no hello yet")
		}
	})
}

// awaitNotice reads ch until want arrives, skipping hellos; anything else fails t.
func awaitNotice(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case n := <-ch:
			if n == want {
				return
			}
			if !strings.HasPrefix(n, "hello ") {
				t.Fatalf("notice %q arrived while waiting for %q", n, want)
			}
		case <-timeout:
			t.Fatalf("notice %q not delivered within 20s", want)
		}
	}
}

func podNotices(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c := client(t)
	pB, other := pod(c), pod(c)
	ch, stop := listen(t, e.NB, pB)
	awaitListening(t, e.NA, pB, ch)
	if err := e.NB.PodNotices(ctx, pB, func(string) {}); !errors.Is(err, replay.ErrInvalid) {
		t.Fatalf("a second listener for one pod on one store: %v; want ErrInvalid", err)
	}
	// A notice to another pod is not delivered here: the marker after it is first.
	if err := e.NA.NotifyPod(ctx, other, "close "+c+" elsewhere"); err != nil {
		t.Fatalf("notify another pod: %v", err)
	}
	want := "close " + c + " sessB"
	if err := e.NA.NotifyPod(ctx, pB, want); err != nil {
		t.Fatalf("notify: %v", err)
	}
	awaitNotice(t, ch, want)
	long := strings.Repeat("~", replay.MaxNoticeLen)
	if err := e.NA.NotifyPod(ctx, pB, long); err != nil {
		t.Fatalf("notify the longest notice: %v", err)
	}
	awaitNotice(t, ch, long)
	if err := stop(); err != nil {
		t.Fatalf("PodNotices after its context ended: %v; want nil", err)
	}
	// With nobody listening a notice is dropped, not an error; a new listener for
	// the pod may start.
	if err := e.NA.NotifyPod(ctx, pB, "close "+c+" late"); err != nil {
		t.Fatalf("notify with nobody listening: %v", err)
	}
	ch2, _ := listen(t, e.NB, pB)
	awaitListening(t, e.NA, pB, ch2)
}
