package replay_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// redisControl opens two logs on one Redis: what one pod writes, another reads.
func redisControl(addrs []string) func(t *testing.T) controlEnv {
	return func(t *testing.T) controlEnv {
		a := newRedisLog(t, addrs, replay.RedisConfig{})
		b := newRedisLog(t, addrs, replay.RedisConfig{})
		return controlEnv{a: accessControl(t, a), b: accessControl(t, b), now: time.Now, pass: passReal}
	}
}

// passReal returns once d has passed on the wall clock Redis and the logs share.
func passReal(t *testing.T, d time.Duration) {
	until := time.Now().Add(d)
	replaytest.Eventually(t, d+10*time.Second, "time to pass", func() bool { return time.Now().After(until) })
}

func TestRedisControlStandalone(t *testing.T) {
	t.Parallel()
	runControl(t, redisControl(redistest.SharedStandalone(t).Addrs()))
}

func TestRedisControlCluster(t *testing.T) {
	t.Parallel()
	runControl(t, redisControl(redistest.SharedCluster(t).Addrs()))
}

// TestRedisControlKeys: tickets and revocations live under room:, beside the room
// keys and never among them; a ticket expires in Redis itself.
func TestRedisControlKeys(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctl := controlOf(t, l)
	ctx := context.Background()
	id := ticketID(t, "key")
	if err := ctl.Tickets.PutTicket(ctx, id, []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	key := "room:ticket:{" + id + "}"
	if ttl, err := strconv.Atoi(s.MustDo(t, "PTTL", key)); err != nil || ttl <= 0 || ttl > 60000 {
		t.Fatalf("PTTL %s = %d, %v; want a ttl of at most a minute", key, ttl, err)
	}
	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	r := replay.Revocation{Kind: "sub", Value: redistest.Prefix(t), At: time.UnixMilli(1700000000000), Until: until}
	if err := ctl.Revocations.Revoke(ctx, r); err != nil {
		t.Fatal(err)
	}
	member := `{"kind":"sub","value":"` + r.Value + `","at":1700000000000}`
	if score, want := s.MustDo(t, "ZSCORE", "room:revoked", member), strconv.FormatInt(until.UnixMilli(), 10); score != want {
		t.Fatalf("ZSCORE room:revoked %s = %q, want %s", member, score, want)
	}
}

// TestRedisRevocationsSkipMalformed: members of room:revoked and notices that do not
// decode or validate are skipped and counted, never reported, never a panic.
func TestRedisRevocationsSkipMalformed(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t)
	far := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	bad := []struct{ score, member string }{
		{far, "not json"},
		{far, `{"kind":"iss","value":"x","at":1700000000000}`},
		{far, `{"kind":"sub","value":"","at":1700000000000}`},
		{far, `{"kind":"sub","value":"x","at":1700000000000,"extra":1}`},
		{far, `{"kind":"sub","value":"x","at":99999999999999}`}, // until before at
		{far + ".5", `{"kind":"sub","value":"y","at":1700000000000}`},
		{far, `{"kind":"sub","value":"x","at":1700000000000}trailing`},
	}
	for _, b := range bad {
		s.MustDo(t, "ZADD", "room:revoked", b.score, b.member)
	}
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctl := controlOf(t, l)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	marker := replay.Revocation{Kind: "jti", Value: "marker", At: now, Until: now.Add(2 * time.Hour)}
	if err := ctl.Revocations.Revoke(ctx, marker); err != nil {
		t.Fatal(err)
	}
	ch := watch(t, accessControl(t, l))
	if before := await(t, ch, marker); len(before) != 0 {
		t.Fatalf("malformed members reported: %+v", before)
	}
	if n := l.Stats().BadRevocations; n < uint64(len(bad)) {
		t.Fatalf("BadRevocations = %d, want at least %d", n, len(bad))
	}
	// A malformed notice on the channel: skipped and counted. Nothing announces that
	// the watcher subscribed, so publish until one is counted.
	base := l.Stats().BadRevocations
	replaytest.Eventually(t, 20*time.Second, "a malformed notice counted", func() bool {
		s.MustDo(t, "SPUBLISH", "room:revoked", "{not a notice")
		n := l.Stats().BadRevocations
		return n > base && (n-base)%uint64(len(bad)) != 0
	})
	marker2 := replay.Revocation{Kind: "jti", Value: "marker2", At: now, Until: now.Add(3 * time.Hour)}
	if err := ctl.Revocations.Revoke(ctx, marker2); err != nil {
		t.Fatal(err)
	}
	for _, r := range await(t, ch, marker2) {
		if r.Value != "marker" {
			t.Fatalf("reported %+v", r)
		}
	}
}

// awaitWatching waits until l's revocation watcher is subscribed on s. Nothing
// announces the subscription; a malformed notice counted says it is live.
func awaitWatching(t *testing.T, s *redistest.Server, l *replay.RedisLog) {
	t.Helper()
	replaytest.Eventually(t, 20*time.Second, "the watcher subscribed", func() bool {
		s.MustDo(t, "SPUBLISH", "room:revoked", "{not a notice")
		return l.Stats().BadRevocations > 0
	})
}

// TestRedisRevocationNotice: once a watcher is subscribed, a revocation reaches it by
// its notice alone (the periodic reload is an hour away).
func TestRedisRevocationNotice(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t)
	a := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctlA := controlOf(t, a)
	b := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	replay.SetRevocationReload(b, time.Hour)
	ch := watch(t, accessControl(t, b))
	awaitWatching(t, s, b)
	// From here on the set is read again only after a resubscription.
	now := time.Now().Truncate(time.Millisecond)
	r := replay.Revocation{Kind: "jti", Value: "by-notice", At: now, Until: now.Add(time.Hour)}
	if err := ctlA.Revocations.Revoke(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	await(t, ch, r)
}

// TestRedisRevocationsReloadAfterResubscribe: a revocation written while no notice
// reached the watcher (here: written straight into the set) is read once the
// watcher's connection is lost and its subscription comes back.
func TestRedisRevocationsReloadAfterResubscribe(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	replay.SetRevocationReload(l, time.Hour)
	ch := watch(t, accessControl(t, l))
	awaitWatching(t, s, l)
	now := time.Now().Truncate(time.Millisecond)
	r := replay.Revocation{Kind: "sub", Value: "silent", At: now, Until: now.Add(time.Hour)}
	member := `{"kind":"sub","value":"silent","at":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`
	s.MustDo(t, "ZADD", "room:revoked", strconv.FormatInt(r.Until.UnixMilli(), 10), member)
	// The connection that holds the subscription (it serves other commands too).
	if n := s.MustDo(t, "CLIENT", "KILL", "TYPE", "pubsub"); n != "1" {
		t.Fatalf("CLIENT KILL TYPE pubsub killed %s connections, want 1", n)
	}
	await(t, ch, r)
}
