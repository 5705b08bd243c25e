package replay

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redis/rueidis"
)

// Hot rooms: a room that spans every pod has one shard channel, so one Redis shard
// delivers every doorbell of it to every pod. For rooms matching RedisConfig.HotRooms
// the doorbell is also sent to k sub-channels, room:{<room>#<i>} for i in [0,k): each
// has its own hash tag, so they hash to different slots (and, with enough shards,
// different shards), and each pod subscribes to the one a hash of its PodID picks.
// A room name cannot hold "#", so a sub-channel is never a real room's channel, and
// it stays under the room: prefix the ACL grants.
//
// The publish function can touch only its own slot, so the sub-channels are rung
// after it returns, one SPUBLISH each, pipelined: not atomically. A ring that is lost
// (the publishing pod dies between the two, a node fails the SPUBLISH, a publisher
// without the hot-room configuration) is a gap like any other, and the log is the
// truth: a pod on that sub-channel sees it with the room's next event (seq != last+1
// starts a repair), and a periodic check (HotCheckInterval) compares every
// subscribed hot room's head with the last doorbell it heard and rings a zero Event
// when the head is ahead. So a lost ring reaches the members within the next event or
// HotCheckInterval plus one head read and one repair read, whichever comes first.
// Concurrent publishers' rings can also arrive out of order on a sub-channel; the
// reader repairs from the log and drops the late duplicate.

// Hot-room bounds.
const (
	// MaxHotPatterns bounds the patterns in RedisConfig.HotRooms.
	MaxHotPatterns = 1024
	// MaxHotPartitions bounds RedisConfig.HotPartitions.
	MaxHotPartitions = 64
	// MaxPodIDLen bounds RedisConfig.PodID, in bytes.
	MaxPodIDLen = 253
)

// ValidHotPattern reports whether p is a hot-room pattern: a valid room name (that
// room), or a prefix of one followed by "*" (every room that extends it, as in an
// access grant; "*" alone is every room).
func ValidHotPattern(p string) bool {
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return prefix == "" || ValidRoom(prefix) && len(prefix) < MaxRoomLen
	}
	return ValidRoom(p)
}

// ParseHotRooms reads a comma-separated list of hot-room patterns (see
// ValidHotPattern); blanks around a pattern and empty items are ignored, duplicates
// dropped. It fails on an invalid pattern or more than MaxHotPatterns.
func ParseHotRooms(s string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		p := strings.TrimSpace(item)
		if p == "" || slices.Contains(out, p) {
			continue
		}
		if !ValidHotPattern(p) {
			return nil, fmt.Errorf("hot room pattern %q: want a room name ([A-Za-z0-9._~-]{1,128}) or a prefix of one followed by *", clip(p))
		}
		if len(out) == MaxHotPatterns {
			return nil, fmt.Errorf("more than %d hot room patterns", MaxHotPatterns)
		}
		out = append(out, p)
	}
	return out, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	s = s[:64]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// ValidPodID reports whether id can name a pod: 1 to MaxPodIDLen bytes of printable
// ASCII, no spaces.
func ValidPodID(id string) bool {
	if len(id) == 0 || len(id) > MaxPodIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// HotPartition is the sub-channel, in [0,k), that the pod named podID listens to for
// every hot room: FNV-1a of the id, modulo k.
func HotPartition(podID string, k int) int {
	if k < 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(podID))
	return int(h.Sum32() % uint32(k))
}

// HotChannel is sub-channel i of a hot room's doorbell. room must have passed
// ValidRoom.
func HotChannel(room string, i int) string {
	return "room:{" + room + "#" + strconv.Itoa(i) + "}"
}

// redisHot is a RedisLog's hot-room configuration and counters; nil when no room is
// hot.
type redisHot struct {
	exact    map[string]bool
	prefixes []string
	all      bool
	k        int
	part     int
	interval time.Duration

	rings        atomic.Uint64 // sub-channel SPUBLISHes that succeeded
	ringErrors   atomic.Uint64 // sub-channel SPUBLISHes that failed
	checkRepairs atomic.Uint64 // zero rings from the periodic check
	ringErrorLog atomic.Int64  // when a failed ring was last logged, Unix ns

	skip atomic.Pointer[func(channel string, ev Event) bool] // tests: drop a ring
}

// newRedisHot validates the hot-room part of cfg (defaults filled in place) and
// returns nil when no pattern is set.
func newRedisHot(cfg *RedisConfig) (*redisHot, error) {
	if cfg.HotPartitions == 0 {
		cfg.HotPartitions = 4
	}
	if cfg.HotCheckInterval == 0 {
		cfg.HotCheckInterval = time.Second
	}
	switch {
	case cfg.HotPartitions < 2 || cfg.HotPartitions > MaxHotPartitions:
		return nil, fmt.Errorf("replay: redis: hot partitions %d: must be between 2 and %d", cfg.HotPartitions, MaxHotPartitions)
	case cfg.HotCheckInterval < time.Millisecond:
		return nil, fmt.Errorf("replay: redis: hot check interval %s: must be at least 1ms", cfg.HotCheckInterval)
	case len(cfg.HotRooms) > MaxHotPatterns:
		return nil, fmt.Errorf("replay: redis: %d hot room patterns: at most %d", len(cfg.HotRooms), MaxHotPatterns)
	case len(cfg.HotRooms) == 0:
		return nil, nil
	case !ValidPodID(cfg.PodID):
		return nil, errors.New("replay: redis: hot rooms need a pod id of 1 to 253 printable ASCII bytes")
	}
	h := &redisHot{
		exact:    make(map[string]bool),
		k:        cfg.HotPartitions,
		part:     HotPartition(cfg.PodID, cfg.HotPartitions),
		interval: cfg.HotCheckInterval,
	}
	for _, p := range cfg.HotRooms {
		if !ValidHotPattern(p) {
			return nil, fmt.Errorf("replay: redis: hot room pattern %q: want a room name or a prefix of one followed by *", clip(p))
		}
		switch prefix, ok := strings.CutSuffix(p, "*"); {
		case !ok:
			h.exact[p] = true
		case prefix == "":
			h.all = true
		default:
			h.prefixes = append(h.prefixes, prefix)
		}
	}
	return h, nil
}

// match reports whether room is hot; false on a nil h.
func (h *redisHot) match(room string) bool {
	if h == nil {
		return false
	}
	if h.all || h.exact[room] {
		return true
	}
	for _, p := range h.prefixes {
		// As a grant's pattern: a prefix matches the rooms that extend it.
		if len(room) > len(p) && strings.HasPrefix(room, p) {
			return true
		}
	}
	return false
}

// subChannel is the channel this pod subscribes to for room: the room's own, or its
// sub-channel when the room is hot.
func (l *RedisLog) subChannel(room string) string {
	if l.hot.match(room) {
		return HotChannel(room, l.hot.part)
	}
	return redisChannel(room)
}

// doorbellPayload is the doorbell message the publish functions send (see
// roomcast.lua and decodeDoorbell): "<epoch> <seq> <ts> <type>\n<body>", with
// " <expires>" after the type for an event with a deadline.
func doorbellPayload(ev Event) string {
	var b strings.Builder
	b.Grow(len(ev.Epoch) + len(ev.Type) + len(ev.Body) + 44)
	b.WriteString(ev.Epoch)
	b.WriteByte(' ')
	b.WriteString(strconv.FormatUint(ev.Seq, 10))
	b.WriteByte(' ')
	b.WriteString(strconv.FormatInt(ev.TS, 10))
	b.WriteByte(' ')
	b.WriteString(ev.Type)
	if ev.Expires != 0 {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(ev.Expires, 10))
	}
	b.WriteByte('\n')
	b.Write(ev.Body)
	return b.String()
}

// ringHot rings the sub-channels of every hot room among evs, pipelined (one round
// trip per node). Events without a seq (failed items) or without a body (idempotent
// repeats, which published nothing new) are skipped. A failed ring is counted and
// left to the readers' repair; it never fails the publish, which is in the log.
func (l *RedisLog) ringHot(ctx context.Context, evs ...Event) {
	if l.hot == nil {
		return
	}
	skip := l.hot.skip.Load()
	var cmds []rueidis.Completed
	for _, ev := range evs {
		if ev.Seq == 0 || ev.Body == nil || !l.hot.match(ev.Room) {
			continue
		}
		msg := doorbellPayload(ev)
		for i := range l.hot.k {
			ch := HotChannel(ev.Room, i)
			if skip != nil && (*skip)(ch, ev) {
				continue
			}
			cmds = append(cmds, l.client.B().Spublish().Channel(ch).Message(msg).Build())
		}
	}
	if len(cmds) == 0 {
		return
	}
	for _, res := range l.doMulti(ctx, OpPublish, l.client, cmds...) {
		if err := res.Error(); err != nil {
			n := l.hot.ringErrors.Add(1)
			l.warnRarely(&l.hot.ringErrorLog, "hot room sub-channel ring failed; readers repair from the log",
				"err", err, "ring_errors", n)
			continue
		}
		l.hot.rings.Add(1)
	}
}

// hotCheck runs checkHotRooms every HotCheckInterval (jittered) until Close.
func (l *RedisLog) hotCheck() {
	t := time.NewTimer(jitter(l.hot.interval))
	defer t.Stop()
	for {
		select {
		case <-l.life.Done():
			return
		case <-t.C:
		}
		l.checkHotRooms()
		t.Reset(jitter(l.hot.interval))
	}
}

// checkHotRooms compares each subscribed hot room's head with the last doorbell its
// sub-channel brought, and rings a zero Event when the head is ahead: a ring lost
// after the room's last event would otherwise wait for the next event.
func (l *RedisLog) checkHotRooms() {
	l.mu.Lock()
	var subs []*redisSub
	for room, s := range l.subs {
		if l.hot.match(room) && !s.stopping {
			subs = append(subs, s)
		}
	}
	l.mu.Unlock()
	for _, s := range subs {
		if l.life.Err() != nil {
			return
		}
		head, err := l.Head(l.life, s.room)
		if err != nil {
			l.cfg.Logger.Debug("hot room check: head read failed", "room", s.room, "err", err)
			continue
		}
		s.ringMu.Lock()
		if !s.stopped && head.Seq != 0 && (head.Epoch != s.seen.Epoch || head.Seq > s.seen.Seq) {
			s.seen = head
			l.hot.checkRepairs.Add(1)
			s.ring(Event{})
		}
		s.ringMu.Unlock()
	}
}

// startHot starts the periodic check when some room is hot.
func (l *RedisLog) startHot() {
	if l.hot != nil {
		l.spawn(l.hotCheck)
	}
}

// hotStats fills the hot-room fields of st.
func (l *RedisLog) hotStats(st *RedisStats) {
	if l.hot == nil {
		return
	}
	st.HotRings = l.hot.rings.Load()
	st.HotRingErrors = l.hot.ringErrors.Load()
	st.HotCheckRepairs = l.hot.checkRepairs.Load()
}
