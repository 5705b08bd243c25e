package replay

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Client ownership in Redis. Keys and channels sit under "room:", the prefix a pod's
// ACL grants, and never among a room's keys (always "room:{<room>}:…"):
//
//	room:client:{<client>}  hash boot, session, pod, since (Unix ms), identity, with a TTL
//	room:pod:{<pod>}        shard channel: notices to one pod
//
// Claim, refresh and release are functions of the roomcast library (roomcast.lua),
// each atomic on Redis's side; ClientOwner reads with HMGET. The client's key and
// the pod's channel hash to their own slots: one key or channel per command, so all
// of it works on a cluster. Claim and refresh are roomcast_v1_claim_as and
// roomcast_v1_refresh_as, which take the identity; the library keeps
// roomcast_v1_claim and roomcast_v1_refresh, without one, for the pods of an older
// version during a rollout (an entry they write binds no identity).
const (
	redisFnClaim   = "roomcast_v1_claim_as"
	redisFnRefresh = "roomcast_v1_refresh_as"
	redisFnRelease = "roomcast_v1_release"
)

// Key and channel names; client and pod must have passed ValidClient and ValidPodID.
func redisClientKey(client string) string { return "room:client:{" + client + "}" }
func redisPodChannel(pod string) string   { return "room:pod:{" + pod + "}" }

var _ Owners = (*RedisLog)(nil)

// redisOwners is a RedisLog's share of the ownership registry: the pods it listens
// for, and its count of malformed entries and notices.
type redisOwners struct {
	mu        sync.Mutex
	listening map[string]bool

	bad    atomic.Uint64 // malformed entries and notices read back
	badLog atomic.Int64  // when one was last logged, Unix ns
}

// badOwner counts and (rarely) logs something malformed read back from Redis.
func (l *RedisLog) badOwner(what string) {
	n := l.owners.bad.Add(1)
	l.warnRarely(&l.owners.badLog, "malformed "+what+" ignored (check who may write room: keys and channels)", "bad_owners", n)
}

// ClaimClient implements Owners with roomcast_v1_claim_as. A claim whose outcome is
// unknown (the connection lost after sending) is not repeated: it fails, wrapping
// ErrUnavailable.
func (l *RedisLog) ClaimClient(ctx context.Context, o Owner, ttl time.Duration) (Owner, error) {
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
	status, other, err := l.decodeClaim(o.Client, arr)
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
func (l *RedisLog) decodeClaim(client string, arr []rueidis.RedisMessage) (int64, Owner, error) {
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
		l.badOwner("client owner entry")
	}
	return status, o, nil
}

// RefreshClient implements Owners with roomcast_v1_refresh_as; repeating it is safe
// (a repeat finds its own entry).
func (l *RedisLog) RefreshClient(ctx context.Context, o Owner, ttl time.Duration) (bool, error) {
	if l.isClosed.Load() {
		return false, ErrClosed
	}
	o, err := ownerArgs(o, ttl)
	if err != nil {
		return false, fmt.Errorf("replay: refresh client: %w", err)
	}
	n, err := l.ownerCall(ctx, redisFnRefresh, 2, o.Client, ownerArgv(o, ttl)...)
	switch {
	case err != nil:
		return false, fmt.Errorf("replay: refresh client %q: %w", o.Client, err)
	case n == 0:
		return false, fmt.Errorf("replay: refresh client %q: %w", o.Client, ErrNotOwner)
	}
	return n == 2, nil
}

// ReleaseClient implements Owners with roomcast_v1_release; repeating it is safe.
func (l *RedisLog) ReleaseClient(ctx context.Context, client, session string) error {
	if l.isClosed.Load() {
		return ErrClosed
	}
	if !ValidClient(client) || !ValidSession(session) {
		return fmt.Errorf("replay: release client %q: %w", client, ErrInvalid)
	}
	if _, err := l.ownerCall(ctx, redisFnRelease, 1, client, session); err != nil {
		return fmt.Errorf("replay: release client %q: %w", client, err)
	}
	return nil
}

// ownerCall runs a conditional function on client's key, retried while safe (it
// is idempotent), and returns its answer, from 0 to max.
func (l *RedisLog) ownerCall(ctx context.Context, fn string, max int64, client string, args ...string) (int64, error) {
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
func (l *RedisLog) ClientOwner(ctx context.Context, client string) (Owner, bool, error) {
	if l.isClosed.Load() {
		return Owner{}, false, ErrClosed
	}
	if !ValidClient(client) {
		return Owner{}, false, fmt.Errorf("replay: client owner %q: %w", client, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return Owner{}, false, fmt.Errorf("replay: client owner %q: %w", client, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var arr []rueidis.RedisMessage
	err := l.retry(cctx, true, func(ctx context.Context) error {
		cmd := l.client.B().Hmget().Key(redisClientKey(client)).Field("boot", "session", "pod", "since", "identity").Build()
		var err error
		arr, err = l.do(ctx, OpOwner, l.client, cmd).ToArray()
		return err
	})
	if err != nil {
		return Owner{}, false, fmt.Errorf("replay: client owner %q: %w", client, l.mapErr(ctx, err))
	}
	if len(arr) != 5 {
		return Owner{}, false, fmt.Errorf("replay: client owner %q: %w: HMGET answered %d values", client, ErrUnavailable, len(arr))
	}
	f := make([]string, 5)
	none := true
	for i, m := range arr {
		if m.IsNil() {
			continue
		}
		none = false
		f[i], _ = m.ToString() // not a string: stays "", which fails validation
	}
	if none {
		return Owner{}, false, nil
	}
	o, ok := decodeOwner(client, f[0], f[1], f[2], f[3], f[4])
	if !ok {
		l.badOwner("client owner entry")
		return Owner{}, false, nil
	}
	return o, true, nil
}

// NotifyPod implements Owners: SPUBLISH on the pod's shard channel, not repeated
// when its outcome is unknown.
func (l *RedisLog) NotifyPod(ctx context.Context, pod, notice string) error {
	if l.isClosed.Load() {
		return ErrClosed
	}
	if !ValidPodID(pod) || !validNotice(notice) {
		return fmt.Errorf("replay: notify pod %q: %w", pod, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: notify pod %q: %w", pod, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.retry(cctx, false, func(ctx context.Context) error {
		return l.do(ctx, OpOwner, l.client, l.client.B().Spublish().Channel(redisPodChannel(pod)).Message(notice).Build()).Error()
	})
	if err != nil {
		return fmt.Errorf("replay: notify pod %q: %w", pod, l.mapErr(ctx, err))
	}
	return nil
}

// PodNotices implements Owners: one SSUBSCRIBE on the pod's shard channel, held
// like a room's (subscribed again after a failover, slot move or lost connection;
// notices sent meanwhile are lost) and ended with SUNSUBSCRIBE. fn runs on the
// caller's goroutine. Close waits for it to return.
func (l *RedisLog) PodNotices(ctx context.Context, pod string, fn func(notice string)) error {
	if !ValidPodID(pod) {
		return fmt.Errorf("replay: pod notices %q: %w", pod, ErrInvalid)
	}
	o := &l.owners
	o.mu.Lock()
	if o.listening[pod] {
		o.mu.Unlock()
		return fmt.Errorf("replay: pod notices %q: already listening: %w", pod, ErrInvalid)
	}
	if o.listening == nil {
		o.listening = make(map[string]bool)
	}
	o.listening[pod] = true
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.listening, pod)
		o.mu.Unlock()
	}()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.wg.Add(1)
	l.mu.Unlock()
	defer l.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.life, cancel)()
	channel := redisPodChannel(pod)
	onMessage := func(m rueidis.PubSubMessage) {
		if !validNotice(m.Message) {
			l.badOwner("pod notice")
			return
		}
		fn(m.Message)
	}
	// Canceling Receive only stops local delivery: unless the whole log closes
	// (dropping its connections), unsubscribe on the connection that held it.
	onReturn := func(err error, c rueidis.CommandClient) error {
		if ctx.Err() == nil || l.life.Err() != nil {
			return err
		}
		uctx, ucancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
		defer ucancel()
		if uerr := c.Do(uctx, c.B().Sunsubscribe().Channel(channel).Build()).Error(); uerr != nil {
			l.cfg.Logger.Debug("pod notice sunsubscribe failed", "pod", pod, "err", uerr)
		}
		return err
	}
	delay := subRetryMin
	for ctx.Err() == nil {
		if l.connected.Load() {
			var confirmed atomic.Bool
			rctx := rueidis.WithOnSubscriptionHook(ctx, func(p rueidis.PubSubSubscription) {
				if p.Kind == "ssubscribe" && p.Channel == channel {
					confirmed.Store(true)
				}
			})
			rctx = rueidis.WithOnReceiveReturnHook(rctx, onReturn)
			err := l.client.Receive(rctx, l.client.B().Ssubscribe().Channel(channel).Build(), onMessage)
			if ctx.Err() != nil {
				break
			}
			if confirmed.Load() {
				delay = subRetryMin
			}
			l.cfg.Logger.Debug("pod notice subscription ended; subscribing again", "pod", pod, "err", err)
		}
		t := time.NewTimer(jitter(delay))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = min(delay*2, subRetryMax)
	}
	if l.isClosed.Load() {
		return ErrClosed
	}
	return nil
}
