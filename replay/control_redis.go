package replay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// The control plane in Redis. Its keys sit under "room:", the prefix a pod's ACL
// grants, and never among a room's keys (always "room:{<room>}:…"; a room name holds
// no "{", "}" or ":"):
//
//	room:ticket:{<id>}  string with a TTL: one ticket, SET PX NX, redeemed by GETDEL,
//	                    read (not redeemed) by GET
//	room:revoked        sorted set: member {"kind","value","at"}, score Until (Unix ms)
//	room:revoked        shard channel: {"kind","value","at","until"} for each Revoke
//
// One key per command, so all of it works on a cluster.
const (
	redisRevokedKey     = "room:revoked"
	redisRevokedChannel = "room:revoked"
)

func redisTicketKey(id string) string { return "room:ticket:{" + id + "}" }

// revocationReload is how often a watching log reads the whole set again, in case a
// notice was lost.
const revocationReload = 5 * time.Second

// redisTickets is a RedisLog's ticket store (Tickets), on the log's client.
type redisTickets struct{ l *RedisLog }

var (
	_ Tickets     = (*redisTickets)(nil)
	_ Revocations = (*redisRevocations)(nil)
)

// PutTicket implements Tickets: SET PX NX. An id in use is ErrInvalid. A call whose
// outcome is unknown (the connection lost after sending) is not repeated: the
// repeat would find its own ticket and fail.
func (tk *redisTickets) PutTicket(ctx context.Context, id string, value []byte, ttl time.Duration) error {
	l := tk.l
	if l.isClosed.Load() {
		return ErrClosed
	}
	if !validTicket(id, value, ttl) {
		return fmt.Errorf("replay: put ticket: %w", ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: put ticket: %w", err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.retry(cctx, false, func(ctx context.Context) error {
		cmd := l.client.B().Set().Key(redisTicketKey(id)).Value(rueidis.BinaryString(value)).
			Nx().PxMilliseconds(ttl.Milliseconds()).Build()
		return l.do(ctx, OpTicket, l.client, cmd).Error()
	})
	switch {
	case rueidis.IsRedisNil(err):
		return fmt.Errorf("replay: put ticket: id already in use: %w", ErrInvalid)
	case err != nil:
		return fmt.Errorf("replay: put ticket: %w", l.mapErr(ctx, err))
	}
	return nil
}

// TakeTicket implements Tickets: GETDEL, so exactly one taker in the fleet gets it.
// It is not repeated when its outcome is unknown: the first attempt may have taken
// the ticket.
func (tk *redisTickets) TakeTicket(ctx context.Context, id string) ([]byte, error) {
	return tk.readTicket(ctx, "take", id, false, func() rueidis.Completed {
		return tk.l.client.B().Getdel().Key(redisTicketKey(id)).Build()
	})
}

// PeekTicket implements Tickets: GET, repeated when its outcome is unknown (it
// changes nothing).
func (tk *redisTickets) PeekTicket(ctx context.Context, id string) ([]byte, error) {
	return tk.readTicket(ctx, "peek", id, true, func() rueidis.Completed {
		return tk.l.client.B().Get().Key(redisTicketKey(id)).Build()
	})
}

// readTicket runs the command cmd builds for ticket id (verb names it in errors)
// and returns the value it read.
func (tk *redisTickets) readTicket(ctx context.Context, verb, id string, idempotent bool, cmd func() rueidis.Completed) ([]byte, error) {
	l := tk.l
	if l.isClosed.Load() {
		return nil, ErrClosed
	}
	if !validTicketID(id) {
		return nil, fmt.Errorf("replay: %s ticket: %w", verb, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return nil, fmt.Errorf("replay: %s ticket: %w", verb, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var value []byte
	err := l.retry(cctx, idempotent, func(ctx context.Context) error {
		var err error
		value, err = l.do(ctx, OpTicket, l.client, cmd()).AsBytes()
		return err
	})
	switch {
	case rueidis.IsRedisNil(err):
		return nil, ErrTicketUnknown
	case err != nil:
		return nil, fmt.Errorf("replay: %s ticket: %w", verb, l.mapErr(ctx, err))
	case len(value) > maxTicketValue:
		l.revs.bad.Add(1)
		l.warnRarely(&l.revs.badLog, "oversized ticket value ignored (check who may write room: keys)", "bytes", len(value))
		return nil, fmt.Errorf("replay: %s ticket: stored value of %d bytes: %w", verb, len(value), ErrTicketUnknown)
	}
	if value == nil {
		value = []byte{}
	}
	return value, nil
}

// Revoke implements Revocations: ZADD GT (a repeat never shortens Until), prune
// what ended and what is beyond the bound (the revocations that end first go
// first), then SPUBLISH the notice, pipelined; the whole is safe to repeat. A
// revocation whose Until has passed is accepted and not stored. A watching log
// remembers r even when the write fails, and writes it back once Redis lacks it
// (control_redis_restore.go).
func (rv *redisRevocations) Revoke(ctx context.Context, r Revocation) error {
	l := rv.l
	if l.isClosed.Load() {
		return ErrClosed
	}
	if !validRevocation(r) {
		return fmt.Errorf("replay: revoke: %w", ErrInvalid)
	}
	r = normalRevocation(r)
	now := time.Now()
	if !now.Before(r.Until) {
		return nil
	}
	member, notice := encodeRevocation(r)
	rv.known.add(member, r.Until.UnixMilli(), now.UnixMilli())
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: revoke: %w", err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.retry(cctx, true, func(ctx context.Context) error {
		b := l.client.B()
		res := l.doMulti(ctx, OpRevoke, l.client,
			b.Zadd().Key(redisRevokedKey).Gt().ScoreMember().ScoreMember(float64(r.Until.UnixMilli()), member).Build(),
			b.Zremrangebyscore().Key(redisRevokedKey).Min("-inf").Max(strconv.FormatInt(now.UnixMilli(), 10)).Build(),
			b.Zremrangebyrank().Key(redisRevokedKey).Start(0).Stop(-(maxRevocations + 1)).Build(),
			b.Spublish().Channel(redisRevokedChannel).Message(notice).Build())
		for _, res := range res {
			if err := res.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay: revoke %s: %w", r.Kind, l.mapErr(ctx, err))
	}
	return nil
}

// redisRevocations is a RedisLog's revocations (Revocations), on the log's client,
// and their watching: one SSUBSCRIBE on the notice channel and one reload loop for
// all its watchers, started by the first WatchRevocations and stopped by the log's
// Close. Lock order: mu, then a watcher's mu.
type redisRevocations struct {
	l *RedisLog

	mu       sync.Mutex
	watchers map[*revWatcher]struct{}
	started  bool
	reload   chan struct{} // a pending request to read the whole set; made before started
	every    time.Duration // how often to read it anyway; 0: revocationReload

	bad    atomic.Uint64 // malformed members, notices and tickets
	badLog atomic.Int64  // when one was last logged, Unix ns

	known revKnown // what to write back when Redis lost it (control_redis_restore.go)
}

type revWatcher struct {
	mu      sync.Mutex // held while fn runs: calls never overlap
	fn      func(Revocation)
	stopped bool
}

// kick asks the reload loop to read the whole set; it never blocks.
func (rv *redisRevocations) kick() {
	select {
	case rv.reload <- struct{}{}:
	default:
	}
}

// WatchRevocations implements Revocations. fn runs on the log's goroutines: the
// notice subscription's and the reload loop's. The set is read when the watcher
// starts, after every (re)subscription and every 5s.
func (rv *redisRevocations) WatchRevocations(ctx context.Context, fn func(Revocation)) {
	l := rv.l
	if l.isClosed.Load() || ctx.Err() != nil {
		return
	}
	w := &revWatcher{fn: fn}
	rv.mu.Lock()
	if rv.watchers == nil {
		rv.watchers = make(map[*revWatcher]struct{})
		rv.reload = make(chan struct{}, 1)
	}
	rv.watchers[w] = struct{}{}
	start := !rv.started
	rv.started = true
	rv.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		rv.mu.Lock()
		delete(rv.watchers, w)
		rv.mu.Unlock()
	})
	if start && l.spawn(rv.watchNotices) {
		l.spawn(rv.reloads)
	}
	rv.kick()
}

// deliver calls every watcher's fn with rs.
func (rv *redisRevocations) deliver(rs []Revocation) {
	rv.mu.Lock()
	ws := make([]*revWatcher, 0, len(rv.watchers))
	for w := range rv.watchers {
		ws = append(ws, w)
	}
	rv.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		for _, r := range rs {
			if w.stopped || rv.l.isClosed.Load() {
				break
			}
			w.fn(r)
		}
		w.mu.Unlock()
	}
}

// watchNotices keeps the notice channel subscribed until Close, like a room's
// receiveLoop: Receive returns nil on an sunsubscribe (failover, slot move) and an
// error on a lost connection; either way, subscribe again. Every confirmation asks
// for a reload, since notices may have been missed meanwhile.
func (rv *redisRevocations) watchNotices() {
	l := rv.l
	delay := subRetryMin
	for l.life.Err() == nil {
		if l.connected.Load() {
			var confirmed atomic.Bool
			ctx := rueidis.WithOnSubscriptionHook(l.life, func(p rueidis.PubSubSubscription) {
				if p.Kind == "ssubscribe" && p.Channel == redisRevokedChannel {
					confirmed.Store(true)
					rv.kick()
				}
			})
			err := l.client.Receive(ctx, l.client.B().Ssubscribe().Channel(redisRevokedChannel).Build(), rv.onNotice)
			if l.life.Err() != nil {
				return
			}
			l.observe(OpRevoke, time.Time{}, err)
			if confirmed.Load() {
				delay = subRetryMin
			}
			l.cfg.Logger.Debug("revocation subscription ended; subscribing again", "err", err)
		}
		t := time.NewTimer(jitter(delay))
		select {
		case <-t.C:
		case <-l.life.Done():
			t.Stop()
			return
		}
		delay = min(delay*2, subRetryMax)
	}
}

// onNotice decodes a notice and reports it; it runs on the subscription's goroutine
// and never blocks (watchers' fn must not).
func (rv *redisRevocations) onNotice(m rueidis.PubSubMessage) {
	r, ok := decodeRevocationNotice(m.Message)
	if !ok {
		n := rv.bad.Add(1)
		rv.l.warnRarely(&rv.badLog, "malformed revocation notice ignored (check who may SPUBLISH to room:revoked)", "bad_revocations", n)
		return
	}
	if now := time.Now(); now.Before(r.Until) {
		member, _ := encodeRevocation(r)
		rv.known.add(member, r.Until.UnixMilli(), now.UnixMilli())
		rv.deliver([]Revocation{r})
	}
}

// reloads reads the whole set when asked and every revocationReload, and writes
// back what it lacks, until Close.
func (rv *redisRevocations) reloads() {
	l := rv.l
	rv.mu.Lock()
	every := cmp.Or(rv.every, revocationReload)
	rv.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.life.Done():
			return
		case <-t.C:
		case <-rv.reload:
		}
		if !l.connected.Load() {
			continue
		}
		ld, err := rv.load()
		if err != nil {
			if l.life.Err() == nil {
				l.cfg.Logger.Debug("revocations not read; trying again", "err", err)
			}
			continue
		}
		rv.deliver(ld.revs)
		rv.restore(ld)
	}
}

// load prunes the revocations that ended and reads those in force, ordered by
// Until, within Timeout. Malformed members are skipped and counted.
func (rv *redisRevocations) load() (revLoad, error) {
	l := rv.l
	ctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
	defer cancel()
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	b := l.client.B()
	res := l.doMulti(ctx, OpRevoke, l.client,
		b.Zremrangebyscore().Key(redisRevokedKey).Min("-inf").Max(now).Build(),
		b.Zrange().Key(redisRevokedKey).Min("("+now).Max("+inf").Byscore().Limit(0, maxRevocations).Withscores().Build())
	if err := res[0].Error(); err != nil {
		l.cfg.Logger.Debug("revocations not pruned", "err", err)
	}
	scores, err := res[1].AsZScores()
	if err != nil {
		return revLoad{}, fmt.Errorf("replay: revocations: read: %w", err)
	}
	ld := revLoad{revs: make([]Revocation, 0, len(scores)), present: make([]revEntry, 0, len(scores)), read: len(scores)}
	bad := 0
	for _, z := range scores {
		r, ok := decodeRevocationMember(z.Member, z.Score)
		if !ok {
			bad++
			continue
		}
		ld.revs = append(ld.revs, r)
		ld.present = append(ld.present, revEntry{member: z.Member, until: r.Until.UnixMilli()})
	}
	if len(scores) > 0 {
		ld.floor = int64(scores[0].Score)
	}
	if bad > 0 {
		n := rv.bad.Add(uint64(bad))
		l.warnRarely(&rv.badLog, "malformed revocations in room:revoked skipped (check who may write room: keys)",
			"skipped", bad, "bad_revocations", n)
	}
	return ld, nil
}

// revocationJSON is a revocation in Redis: the set's member without Until (the
// score), the notice with it. Times are Unix ms.
type revocationJSON struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
	At    int64  `json:"at"`
	Until int64  `json:"until,omitempty"`
}

// encodeRevocation returns r's set member and its notice.
func encodeRevocation(r Revocation) (member, notice string) {
	j := revocationJSON{Kind: r.Kind, Value: r.Value, At: r.At.UnixMilli()}
	m, _ := json.Marshal(j) // strings and integers: cannot fail
	j.Until = r.Until.UnixMilli()
	n, _ := json.Marshal(j)
	return string(m), string(n)
}

// maxRevocationJSON bounds what is decoded: a 256-byte value escaped at worst six
// bytes a byte, and the rest.
const maxRevocationJSON = 6*maxRevocationValue + 128

// decodeRevocationJSON decodes one object with exactly the known fields and nothing
// after it.
func decodeRevocationJSON(s string) (revocationJSON, bool) {
	var j revocationJSON
	if len(s) > maxRevocationJSON {
		return j, false
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return j, false
	}
	return j, true
}

// decodeRevocationMember reads a member of room:revoked and its score.
func decodeRevocationMember(member string, score float64) (Revocation, bool) {
	j, ok := decodeRevocationJSON(member)
	if !ok || j.Until != 0 || score != math.Trunc(score) || score <= 0 || score > 1<<53 {
		return Revocation{}, false
	}
	j.Until = int64(score)
	return j.revocation()
}

// decodeRevocationNotice reads a notice from the room:revoked channel.
func decodeRevocationNotice(msg string) (Revocation, bool) {
	j, ok := decodeRevocationJSON(msg)
	if !ok {
		return Revocation{}, false
	}
	return j.revocation()
}

func (j revocationJSON) revocation() (Revocation, bool) {
	r := Revocation{Kind: j.Kind, Value: j.Value, At: time.UnixMilli(j.At), Until: time.UnixMilli(j.Until)}
	return r, validRevocation(r)
}
