package replay

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Client ownership in Redis. Keys sit under "room:", the prefix a pod's ACL grants,
// and never among a room's keys (always "room:{<room>}:…"):
//
//	room:client:{<client>}  hash boot, session, pod, since (Unix ms), identity, with a TTL
//
// Claim, refresh and release are functions of the roomcast library (roomcast.lua),
// each atomic on Redis's side; ClientOwner reads with HMGET. The client's key and
// the pods' notice channels (notices_redis.go) hash to their own slots: one key or
// channel per command, so all of it works on a cluster. Claim and refresh are
// roomcast_v1_claim_as and roomcast_v1_refresh_as, which take the identity; the
// library keeps
// roomcast_v1_claim and roomcast_v1_refresh, without one, for the pods of an older
// version during a rollout (an entry they write binds no identity).
const (
	redisFnClaim   = "roomcast_v1_claim_as"
	redisFnRefresh = "roomcast_v1_refresh_as"
	redisFnRelease = "roomcast_v1_release"
)

// redisClientKey is a client's entry; client must have passed ValidClient.
func redisClientKey(client string) string { return "room:client:{" + client + "}" }

var _ Owners = (*redisOwners)(nil)

// redisOwners is a RedisLog's client ownership registry (Owners), on the log's
// client, and its count of malformed entries and pod notices read back.
type redisOwners struct {
	l *RedisLog

	bad    atomic.Uint64 // malformed entries and notices read back
	badLog atomic.Int64  // when one was last logged, Unix ns
}

// badOwner counts and (rarely) logs something malformed read back from Redis.
func (ro *redisOwners) badOwner(what string) {
	n := ro.bad.Add(1)
	ro.l.warnRarely(&ro.badLog, "malformed "+what+" ignored (check who may write room: keys and channels)", "bad_owners", n)
}

// ClaimClient implements Owners with roomcast_v1_claim_as. A claim whose outcome is
// unknown (the connection lost after sending) is not repeated: it fails, wrapping
// ErrUnavailable.
func (ro *redisOwners) ClaimClient(ctx context.Context, o Owner, ttl time.Duration) (Owner, error) {
	l := ro.l
	if l.isClosed.Load() {
		return Owner{}, ErrClosed
	}
	o, err := ownerArgs(o, ttl)
	if err != nil {
		return Owner{}, fmt.Errorf("replay: claim client: %w", err)
	}
	if err := l.usable(); err != nil {
		return Owner{}, fmt.Errorf("replay: claim client %q: %w", o.Client, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var arr []rueidis.RedisMessage
	err = l.retry(cctx, false, func(ctx context.Context) error {
		cmd := l.client.B().Fcall().Function(redisFnClaim).Numkeys(1).Key(redisClientKey(o.Client)).Arg(ownerArgv(o, ttl)...).Build()
		var err error
		arr, err = l.do(ctx, OpOwner, l.client, cmd).ToArray()
		return err
	})
	if err != nil {
		return Owner{}, fmt.Errorf("replay: claim client %q: %w", o.Client, l.mapErr(ctx, err))
	}
	status, other, err := ro.decodeClaim(o.Client, arr)
	if err != nil {
		return Owner{}, fmt.Errorf("replay: claim client %q: %w", o.Client, err)
	}
	switch status {
	case 0:
		return other, fmt.Errorf("replay: claim client %q: %w", o.Client, ErrSuperseded)
	case 2:
		return other, fmt.Errorf("replay: claim client %q: %w", o.Client, ErrOtherIdentity)
	}
	return other, nil
}

// ownerArgv is the ARGV of claim_as and refresh_as for o: boot, session, pod, ttl
// ms, identity.
func ownerArgv(o Owner, ttl time.Duration) []string {
	return []string{o.Boot, o.Session, o.Pod, strconv.FormatInt(ttl.Milliseconds(), 10), o.Identity}
}

// decodeClaim reads roomcast_v1_claim_as's answer: {status, boot, session, pod,
// since, identity} of the entry displaced or refusing; status 1 claimed, 0 a newer
// boot holds it, 2 another identity does. A malformed entry is reported as none.
func (ro *redisOwners) decodeClaim(client string, arr []rueidis.RedisMessage) (int64, Owner, error) {
	if len(arr) != 6 {
		return 0, Owner{}, fmt.Errorf("%w: claim answered %d values, want 6", ErrUnavailable, len(arr))
	}
	status, err := arr[0].AsInt64()
	f := make([]string, 5)
	for i := range f {
		if err == nil {
			f[i], err = arr[i+1].ToString()
		}
	}
	if err != nil || status < 0 || status > 2 {
		return 0, Owner{}, fmt.Errorf("%w: claim answered %v", ErrUnavailable, arr)
	}
	if f[0] == "" && f[1] == "" && f[2] == "" && f[3] == "" && f[4] == "" {
		return status, Owner{}, nil
	}
	o, ok := decodeOwner(client, f[0], f[1], f[2], f[3], f[4])
	if !ok {
		ro.badOwner("client owner entry")
	}
	return status, o, nil
}

// RefreshClient implements Owners with roomcast_v1_refresh_as; repeating it is safe
// (a repeat finds its own entry).
func (ro *redisOwners) RefreshClient(ctx context.Context, o Owner, ttl time.Duration) (bool, error) {
	if ro.l.isClosed.Load() {
		return false, ErrClosed
	}
	o, err := ownerArgs(o, ttl)
	if err != nil {
		return false, fmt.Errorf("replay: refresh client: %w", err)
	}
	n, err := ro.call(ctx, redisFnRefresh, 2, o.Client, ownerArgv(o, ttl)...)
	switch {
	case err != nil:
		return false, fmt.Errorf("replay: refresh client %q: %w", o.Client, err)
	case n == 0:
		return false, fmt.Errorf("replay: refresh client %q: %w", o.Client, ErrNotOwner)
	}
	return n == 2, nil
}

// ReleaseClient implements Owners with roomcast_v1_release; repeating it is safe.
func (ro *redisOwners) ReleaseClient(ctx context.Context, client, session string) error {
	if ro.l.isClosed.Load() {
		return ErrClosed
	}
	if !ValidClient(client) || !ValidSession(session) {
		return fmt.Errorf("replay: release client %q: %w", client, ErrInvalid)
	}
	if _, err := ro.call(ctx, redisFnRelease, 1, client, session); err != nil {
		return fmt.Errorf("replay: release client %q: %w", client, err)
	}
	return nil
}

// call runs a conditional function on client's key, retried while safe (it is
// idempotent), and returns its answer, from 0 to max.
func (ro *redisOwners) call(ctx context.Context, fn string, max int64, client string, args ...string) (int64, error) {
	l := ro.l
	if err := l.usable(); err != nil {
		return 0, err
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var n int64
	err := l.retry(cctx, true, func(ctx context.Context) error {
		cmd := l.client.B().Fcall().Function(fn).Numkeys(1).Key(redisClientKey(client)).Arg(args...).Build()
		var err error
		n, err = l.do(ctx, OpOwner, l.client, cmd).AsInt64()
		return err
	})
	if err != nil {
		return 0, l.mapErr(ctx, err)
	}
	if n < 0 || n > max {
		return 0, fmt.Errorf("%w: %s answered %d", ErrUnavailable, fn, n)
	}
	return n, nil
}

// ClientOwner implements Owners with HMGET. A malformed entry is counted and
// reported as no owner.
func (ro *redisOwners) ClientOwner(ctx context.Context, client string) (Owner, bool, error) {
	o, _, ok, err := ro.read(ctx, client)
	return o, ok, err
}

// read reads client's owner and the entry's extra fields ("" each when absent) with
// one HMGET. A malformed entry is counted and reported as no owner.
func (ro *redisOwners) read(ctx context.Context, client string, extra ...string) (Owner, []string, bool, error) {
	l := ro.l
	if l.isClosed.Load() {
		return Owner{}, nil, false, ErrClosed
	}
	if !ValidClient(client) {
		return Owner{}, nil, false, fmt.Errorf("replay: client owner %q: %w", client, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return Owner{}, nil, false, fmt.Errorf("replay: client owner %q: %w", client, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	fields := append([]string{"boot", "session", "pod", "since", "identity"}, extra...)
	var arr []rueidis.RedisMessage
	err := l.retry(cctx, true, func(ctx context.Context) error {
		cmd := l.client.B().Hmget().Key(redisClientKey(client)).Field(fields...).Build()
		var err error
		arr, err = l.do(ctx, OpOwner, l.client, cmd).ToArray()
		return err
	})
	if err != nil {
		return Owner{}, nil, false, fmt.Errorf("replay: client owner %q: %w", client, l.mapErr(ctx, err))
	}
	if len(arr) != len(fields) {
		return Owner{}, nil, false, fmt.Errorf("replay: client owner %q: %w: HMGET answered %d values", client, ErrUnavailable, len(arr))
	}
	f := make([]string, len(fields))
	none := true
	for i, m := range arr[:5] {
		if m.IsNil() {
			continue
		}
		none = false
		f[i], _ = m.ToString() // not a string: stays "", which fails validation
	}
	if none {
		return Owner{}, nil, false, nil
	}
	o, ok := decodeOwner(client, f[0], f[1], f[2], f[3], f[4])
	if !ok {
		ro.badOwner("client owner entry")
		return Owner{}, nil, false, nil
	}
	for i, m := range arr[5:] {
		if !m.IsNil() {
			f[5+i], _ = m.ToString()
		}
	}
	return o, f[5:], true, nil
}
