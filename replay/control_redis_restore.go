package replay

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Revocations outlive Redis's data. room:revoked is the fleet's only record of them:
// a Redis that restarts without persistence, is flushed, or fails over to a replica
// that lacked the latest writes comes back without them, and a pod started after
// that would accept the tokens they refuse. So every watching log remembers each
// revocation in force that it wrote or read, and after each reload of the set (after
// every (re)subscription, so after every reconnect, and every 5s) writes back those
// the set lacks: ZADD GT, pruned like Revoke, idempotent, in bounded chunks.

// restoreChunk bounds the members of one write-back ZADD.
const restoreChunk = 1000

// revKnown is the revocations in force that a RedisLog's revocations wrote or read,
// by set member, at most maxRevocations: when full, the one that lapses first is
// forgotten first, as Redis's own bound does.
type revKnown struct {
	mu  sync.Mutex
	m   map[string]knownRev
	gen uint64 // the current reload, for knownRev.seen

	restored   atomic.Uint64 // members written back
	restoreLog atomic.Int64  // when a write-back was last logged, Unix ns
}

type knownRev struct {
	until int64  // Unix ms
	seen  uint64 // the last reload that found it in Redis
}

// revEntry is a member of room:revoked and its Until (Unix ms).
type revEntry struct {
	member string
	until  int64
}

// revLoad is one read of room:revoked.
type revLoad struct {
	revs    []Revocation // the valid members, in force
	present []revEntry   // the same, as members
	read    int          // members read, malformed ones too
	floor   int64        // when the first of them lapses, Unix ms
}

// add remembers member until then, unless it has lapsed at now (Unix ms).
func (k *revKnown) add(member string, until, now int64) {
	if until <= now {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addLocked(member, until, now, 0)
}

func (k *revKnown) addLocked(member string, until, now int64, seen uint64) {
	if old, ok := k.m[member]; ok {
		old.until = max(old.until, until)
		old.seen = max(old.seen, seen)
		k.m[member] = old
		return
	}
	if k.m == nil {
		k.m = make(map[string]knownRev)
	}
	if len(k.m) >= maxRevocations {
		k.evictLocked(now)
	}
	k.m[member] = knownRev{until: until, seen: seen}
}

// evictLocked forgets every lapsed revocation and, when none had lapsed, the one
// that lapses first.
func (k *revKnown) evictLocked(now int64) {
	first, firstUntil := "", int64(math.MaxInt64)
	for m, r := range k.m {
		if r.until <= now {
			delete(k.m, m)
			continue
		}
		if r.until < firstUntil {
			first, firstUntil = m, r.until
		}
	}
	if len(k.m) >= maxRevocations {
		delete(k.m, first)
	}
}

// reconcile takes one reload, remembers the members it did not know, forgets what
// lapsed at now, and returns what Redis lacks. When Redis was full, only what
// outlasts its first to lapse is returned: Redis would drop the rest again at once.
func (k *revKnown) reconcile(ld revLoad, now int64) []revEntry {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	for _, e := range ld.present {
		if e.until > now {
			k.addLocked(e.member, e.until, now, k.gen)
		}
	}
	var lost []revEntry
	for m, r := range k.m {
		switch {
		case r.until <= now:
			delete(k.m, m)
		case r.seen != k.gen && (ld.read < maxRevocations || r.until > ld.floor):
			lost = append(lost, revEntry{member: m, until: r.until})
		}
	}
	return lost
}

// restore writes back what one reload found missing, in chunks, each within
// Timeout; a chunk that fails is left to the next reload.
func (rv *redisRevocations) restore(ld revLoad) {
	l := rv.l
	now := time.Now().UnixMilli()
	lost := rv.known.reconcile(ld, now)
	if len(lost) == 0 {
		return
	}
	written := 0
	for len(lost) > 0 && l.life.Err() == nil {
		chunk := lost[:min(len(lost), restoreChunk)]
		lost = lost[len(chunk):]
		b := l.client.B()
		zadd := b.Zadd().Key(redisRevokedKey).Gt().ScoreMember()
		for _, e := range chunk {
			zadd = zadd.ScoreMember(float64(e.until), e.member)
		}
		ctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
		res := l.doMulti(ctx, OpRevoke, l.client, zadd.Build(),
			b.Zremrangebyscore().Key(redisRevokedKey).Min("-inf").Max(strconv.FormatInt(now, 10)).Build(),
			b.Zremrangebyrank().Key(redisRevokedKey).Start(0).Stop(-(maxRevocations + 1)).Build())
		cancel()
		if err := firstErr(res); err != nil {
			if l.life.Err() == nil {
				l.cfg.Logger.Debug("revocations not written back; trying again at the next reload", "err", err)
			}
			break
		}
		written += len(chunk)
	}
	if written > 0 {
		n := rv.known.restored.Add(uint64(written))
		l.warnRarely(&rv.known.restoreLog,
			"revocations missing from redis written back: redis lost them (restarted without persistence, flushed, or failed over to a replica without them)",
			"written", written, "written_total", n)
	}
}
