package replay

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryConfig bounds a MemoryLog. Every zero value means "the default".
type MemoryConfig struct {
	// History is the number of events kept per room (default 1000).
	History int
	// HistoryTTL is how long a room may go without a publish before its history is
	// forgotten; its next event starts a new epoch (default 24h).
	HistoryTTL time.Duration
	// MaxRooms caps the rooms holding history (default 100000). Past it, Append for a
	// new room returns ErrFull.
	MaxRooms int
	// MaxBytes caps the memory held by all histories, idempotency keys and room
	// records (RoomOverhead plus the name, per room), in bytes (default 512 MiB). A
	// room over budget sheds its own oldest events first; when it has none left to
	// shed, Append returns ErrFull.
	MaxBytes int64
	// IdempotencyTTL is how long an idempotency key is remembered (default 1h).
	IdempotencyTTL time.Duration
	// MaxIdempotencyBytes caps the bytes one room's idempotency keys hold (each its
	// length plus 64), so that one room's keys cannot fill MaxBytes for every
	// room (default MaxBytes/16). A new key that would pass it makes the room forget
	// its own oldest keys first, even inside their TTL; a room's keys are otherwise
	// kept for their whole TTL.
	MaxIdempotencyBytes int64
	// MaxIdempotencyKeys, when positive, caps the keys remembered per room, oldest
	// forgotten first, even inside their TTL. Zero (the default): no cap; keys are
	// bounded by IdempotencyTTL and MaxBytes, so every key holds for its whole TTL.
	MaxIdempotencyKeys int
	// Now is the clock (default time.Now); tests replace it.
	Now func() time.Time
}

func (c *MemoryConfig) fill() error {
	if c.History == 0 {
		c.History = 1000
	}
	if c.HistoryTTL == 0 {
		c.HistoryTTL = 24 * time.Hour
	}
	if c.MaxRooms == 0 {
		c.MaxRooms = 100000
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 512 << 20
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = time.Hour
	}
	if c.MaxIdempotencyBytes == 0 {
		c.MaxIdempotencyBytes = max(c.MaxBytes/idemShare, 1)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.History < 1:
		return fmt.Errorf("replay: history %d: must be at least 1", c.History)
	case c.HistoryTTL < 0, c.IdempotencyTTL < 0:
		return fmt.Errorf("replay: ttl must not be negative")
	case c.MaxRooms < 1:
		return fmt.Errorf("replay: max rooms %d: must be at least 1", c.MaxRooms)
	case c.MaxBytes < 1:
		return fmt.Errorf("replay: max bytes %d: must be positive", c.MaxBytes)
	case c.MaxIdempotencyKeys < 0:
		return fmt.Errorf("replay: max idempotency keys %d: must not be negative", c.MaxIdempotencyKeys)
	case c.MaxIdempotencyBytes < 0:
		return fmt.Errorf("replay: max idempotency bytes %d: must not be negative", c.MaxIdempotencyBytes)
	}
	return nil
}

const memShards = 64

// Per-item bookkeeping charged against MaxBytes on top of the payload.
const (
	eventOverhead = 96
	keyOverhead   = 64
	// roomOverhead is a room's record, its map entries and its slices' headers;
	// its name is charged on top.
	roomOverhead = 320
)

// idemShare: by default one room's idempotency keys may hold 1/idemShare of
// MaxBytes.
const idemShare = 16

func keyCost(key string) int64 { return int64(len(key) + keyOverhead) }

func roomCost(name string) int64 { return int64(roomOverhead + len(name)) }

// MemoryLog is the embedded Log: per-room ring buffers and an in-process doorbell.
type MemoryLog struct {
	cfg    MemoryConfig
	seed   maphash.Seed
	shards [memShards]memShard
	subs   [memShards]subShard

	started time.Time // for Health

	roomCount atomic.Int64
	bytes     atomic.Int64
	evictions atomic.Uint64 // events shed before their time to stay within MaxBytes
	closed    atomic.Bool

	stop chan struct{}
	done chan struct{}

	// The pod's control plane (ControlOf), each store in its file: tickets and
	// revocations (control_memory.go), pods' member counts (occupancy_memory.go),
	// client ownership (owners_memory.go), pod notices (notices_memory.go) and pods'
	// liveness records (pods_memory.go) and their open connections
	// (streams_memory.go). The sweeper prunes them; they refuse calls
	// once the log is closed.
	tickets *memTickets
	revs    *memRevocations
	occ     *memOccupancy
	owners  *memOwners
	notices *memNotices
	pods    *memPods
	streams *memStreams
}

var _ Log = (*MemoryLog)(nil)

type memShard struct {
	mu    sync.Mutex
	rooms map[string]*memRoom
}

type subShard struct {
	mu    sync.RWMutex
	rings map[string]func(Event)
}

type memRoom struct {
	mu   sync.Mutex
	dead bool // removed from its shard; look the room up again

	epoch  string
	seq    uint64  // last assigned seq in epoch
	events []Event // events[off:] are retained, oldest first
	off    int
	bytes  int64
	active time.Time // last publish

	idem      map[string]idemEntry
	idemOrder []string // insertion order, for eviction
	idemBytes int64    // keyCost of every key in idem, within MaxIdempotencyBytes
}

type idemEntry struct {
	pos Position
	at  time.Time
}

// NewMemoryLog returns a MemoryLog and starts its sweeper, which Close stops.
func NewMemoryLog(cfg MemoryConfig) (*MemoryLog, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	l := &MemoryLog{cfg: cfg, started: time.Now(), seed: maphash.MakeSeed(), stop: make(chan struct{}), done: make(chan struct{})}
	l.tickets, l.revs, l.occ = &memTickets{l: l}, &memRevocations{l: l}, &memOccupancy{l: l}
	l.owners, l.notices, l.pods = &memOwners{l: l}, &memNotices{l: l}, &memPods{l: l}
	l.streams = &memStreams{l: l}
	for i := range l.shards {
		l.shards[i].rooms = make(map[string]*memRoom)
		l.subs[i].rings = make(map[string]func(Event))
	}
	go l.sweepLoop()
	return l, nil
}

func (l *MemoryLog) shard(room string) int {
	return int(maphash.String(l.seed, room) % memShards)
}

// Append implements Log.
func (l *MemoryLog) Append(ctx context.Context, room string, m Message) (Event, error) {
	if l.closed.Load() {
		return Event{}, ErrClosed
	}
	if !ValidRoom(room) || (m.Type != "" && !ValidType(m.Type)) || len(m.Body) == 0 || !m.validTTL() {
		return Event{}, fmt.Errorf("replay: append %q: %w", room, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return Event{}, fmt.Errorf("replay: append %q: %w", room, err)
	}
	for {
		r, err := l.roomFor(room)
		if err != nil {
			return Event{}, fmt.Errorf("replay: append %q: %w", room, err)
		}
		r.mu.Lock()
		if r.dead {
			r.mu.Unlock()
			continue
		}
		ev, err := l.appendLocked(r, room, m)
		r.mu.Unlock()
		if err != nil {
			l.dropIfEmpty(room, r)
			return Event{}, fmt.Errorf("replay: append %q: %w", room, err)
		}
		return ev, nil
	}
}

// roomFor returns the room's record, creating it within MaxRooms.
func (l *MemoryLog) roomFor(room string) (*memRoom, error) {
	s := &l.shards[l.shard(room)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rooms[room]; ok {
		return r, nil
	}
	if l.roomCount.Load() >= int64(l.cfg.MaxRooms) || l.bytes.Load()+roomCost(room) > l.cfg.MaxBytes {
		return nil, ErrFull
	}
	l.roomCount.Add(1)
	l.bytes.Add(roomCost(room))
	r := &memRoom{}
	s.rooms[room] = r
	return r, nil
}

// dropIfEmpty forgets a room that holds nothing, so that a refused first publish
// does not keep a room record charged until the sweep. Lock order: shard, then room.
func (l *MemoryLog) dropIfEmpty(room string, r *memRoom) {
	s := &l.shards[l.shard(room)]
	s.mu.Lock()
	defer s.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead || r.seq != 0 || len(r.idem) != 0 || s.rooms[room] != r {
		return
	}
	l.forgetLocked(s, room, r)
}

// forgetLocked removes r from its shard and releases everything it held. Both locks
// must be held.
func (l *MemoryLog) forgetLocked(s *memShard, room string, r *memRoom) {
	r.dead = true
	l.bytes.Add(-r.bytes - roomCost(room))
	r.bytes = 0
	delete(s.rooms, room)
	l.roomCount.Add(-1)
}

func (l *MemoryLog) appendLocked(r *memRoom, room string, m Message) (Event, error) {
	now := l.cfg.Now()
	if r.epoch == "" || now.Sub(r.active) > l.cfg.HistoryTTL {
		l.resetLocked(r)
	}
	if m.IdempotencyKey != "" {
		if e, ok := r.idem[m.IdempotencyKey]; ok && now.Sub(e.at) <= l.cfg.IdempotencyTTL {
			return Event{Room: room, Epoch: e.pos.Epoch, Seq: e.pos.Seq}, nil
		}
	}
	cost := int64(len(m.Body) + len(m.Type) + eventOverhead)
	if m.IdempotencyKey != "" {
		// The room makes room for the new key among its own keys first.
		cost += keyCost(m.IdempotencyKey)
		l.expireKeysLocked(r, now, keyCost(m.IdempotencyKey))
	}
	for l.bytes.Load()+cost > l.cfg.MaxBytes && len(r.events) > r.off {
		l.dropOldestLocked(r)
		l.evictions.Add(1)
	}
	if l.bytes.Load()+cost > l.cfg.MaxBytes {
		return Event{}, ErrFull
	}

	r.seq++
	r.active = now
	ev := Event{Room: room, Epoch: r.epoch, Seq: r.seq, TS: now.UnixMilli(), Type: m.Type, Body: m.Body}
	if ttl := m.ttlMillis(); ttl > 0 {
		ev.Expires = ev.TS + ttl
	}
	r.events = append(r.events, ev)
	r.bytes += eventCost(ev)
	l.bytes.Add(eventCost(ev))
	if len(r.events)-r.off > l.cfg.History {
		l.dropOldestLocked(r)
	}
	if m.IdempotencyKey != "" {
		l.rememberLocked(r, m.IdempotencyKey, ev.Position(), now)
	}
	l.ring(room, ev)
	return ev, nil
}

func eventCost(ev Event) int64 { return int64(len(ev.Body) + len(ev.Type) + eventOverhead) }

// resetLocked starts a new history (and epoch) for r, releasing the old one.
func (l *MemoryLog) resetLocked(r *memRoom) {
	l.bytes.Add(-r.bytes)
	r.epoch, r.seq, r.off, r.bytes = newEpoch(), 0, 0, 0
	r.events, r.idem, r.idemOrder, r.idemBytes = nil, nil, nil, 0
}

func (l *MemoryLog) dropOldestLocked(r *memRoom) {
	c := eventCost(r.events[r.off])
	r.events[r.off] = Event{}
	r.off++
	r.bytes -= c
	l.bytes.Add(-c)
	if r.off >= len(r.events)/2 && r.off > 16 {
		n := copy(r.events, r.events[r.off:])
		clear(r.events[n:])
		r.events = r.events[:n]
		r.off = 0
	}
}

func (l *MemoryLog) rememberLocked(r *memRoom, key string, pos Position, now time.Time) {
	if r.idem == nil {
		r.idem = make(map[string]idemEntry)
	}
	if _, ok := r.idem[key]; !ok {
		r.idemOrder = append(r.idemOrder, key)
		c := keyCost(key)
		r.idemBytes += c
		r.bytes += c
		l.bytes.Add(c)
	}
	r.idem[key] = idemEntry{pos: pos, at: now}
	l.expireKeysLocked(r, now, 0)
}

// expireKeysLocked forgets the room's keys past their TTL, past MaxIdempotencyKeys
// when that is set, and past MaxIdempotencyBytes less incoming (the cost of a key
// about to be added), oldest first.
func (l *MemoryLog) expireKeysLocked(r *memRoom, now time.Time, incoming int64) {
	capped := l.cfg.MaxIdempotencyKeys > 0
	for len(r.idemOrder) > 0 && (capped && len(r.idemOrder) > l.cfg.MaxIdempotencyKeys ||
		r.idemBytes+incoming > l.cfg.MaxIdempotencyBytes ||
		now.Sub(r.idem[r.idemOrder[0]].at) > l.cfg.IdempotencyTTL) {
		old := r.idemOrder[0]
		r.idemOrder[0] = ""
		r.idemOrder = r.idemOrder[1:]
		delete(r.idem, old)
		c := keyCost(old)
		r.idemBytes -= c
		r.bytes -= c
		l.bytes.Add(-c)
	}
	if len(r.idemOrder) == 0 {
		r.idem, r.idemOrder = nil, nil
	}
}

func (l *MemoryLog) ring(room string, ev Event) {
	s := &l.subs[l.shard(room)]
	s.mu.RLock()
	fn := s.rings[room]
	s.mu.RUnlock()
	if fn != nil {
		fn(ev)
	}
}

// lookup returns the room's record, if any; the caller checks expiry under its lock.
func (l *MemoryLog) lookup(room string) *memRoom {
	s := &l.shards[l.shard(room)]
	s.mu.Lock()
	r := s.rooms[room]
	s.mu.Unlock()
	return r
}

// Since implements Log. A limit of zero or less returns no events but still checks
// the position.
func (l *MemoryLog) Since(ctx context.Context, room string, after Position, limit int) ([]Event, Position, error) {
	if l.closed.Load() {
		return nil, Position{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, Position{}, fmt.Errorf("replay: since %q: %w", room, err)
	}
	var head Position
	var out []Event
	gap := false
	if r := l.lookup(room); r != nil {
		r.mu.Lock()
		head, out, gap = l.sinceLocked(r, after, limit)
		r.mu.Unlock()
	} else {
		gap = after.Seq != 0 || after.Epoch != ""
	}
	if gap {
		return nil, head, fmt.Errorf("replay: since %q after %s: %w", room, after, ErrGap)
	}
	return out, head, nil
}

func (l *MemoryLog) sinceLocked(r *memRoom, after Position, limit int) (head Position, out []Event, gap bool) {
	if r.dead || r.epoch == "" || l.cfg.Now().Sub(r.active) > l.cfg.HistoryTTL {
		return Position{}, nil, after.Seq != 0 || after.Epoch != ""
	}
	head = Position{Epoch: r.epoch, Seq: r.seq}
	if after.Epoch != "" && after.Epoch != r.epoch || after.Seq > r.seq {
		return head, nil, true
	}
	kept := r.events[r.off:]
	oldest := r.seq + 1 - uint64(len(kept)) // first retained seq
	if after.Seq+1 < oldest {
		return head, nil, true
	}
	from := int(after.Seq + 1 - oldest)
	n := len(kept) - from
	if n > limit {
		n = max(limit, 0)
	}
	if n > 0 {
		out = make([]Event, n)
		copy(out, kept[from:from+n])
	}
	return head, out, false
}

// Head implements Log.
func (l *MemoryLog) Head(ctx context.Context, room string) (Position, error) {
	if l.closed.Load() {
		return Position{}, ErrClosed
	}
	r := l.lookup(room)
	if r == nil {
		return Position{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead || r.epoch == "" || l.cfg.Now().Sub(r.active) > l.cfg.HistoryTTL {
		return Position{}, nil
	}
	return Position{Epoch: r.epoch, Seq: r.seq}, nil
}

// Subscribe implements Log.
func (l *MemoryLog) Subscribe(ctx context.Context, room string, ring func(Event)) error {
	if l.closed.Load() {
		return ErrClosed
	}
	s := &l.subs[l.shard(room)]
	s.mu.Lock()
	s.rings[room] = ring
	s.mu.Unlock()
	return nil
}

// Unsubscribe implements Log.
func (l *MemoryLog) Unsubscribe(ctx context.Context, room string) error {
	s := &l.subs[l.shard(room)]
	s.mu.Lock()
	delete(s.rings, room)
	s.mu.Unlock()
	return nil
}

// Close stops the sweeper. It is safe to call more than once.
func (l *MemoryLog) Close(ctx context.Context) error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.stop)
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("replay: close: %w", ctx.Err())
	}
}

// Stats reports the rooms holding history and the bytes charged against MaxBytes.
func (l *MemoryLog) Stats() (rooms int, bytes int64) {
	return int(l.roomCount.Load()), l.bytes.Load()
}

// Evictions counts the events shed before their time, oldest of their room first,
// because the log was at MaxBytes. (A room past MaxRooms is refused, never evicted.)
func (l *MemoryLog) Evictions() uint64 { return l.evictions.Load() }

func (l *MemoryLog) sweepLoop() {
	defer close(l.done)
	every := min(l.cfg.HistoryTTL/4, time.Minute)
	every = max(every, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.sweep()
		}
	}
}

// sweep forgets every room idle for longer than HistoryTTL. Lock order: shard, then
// room.
func (l *MemoryLog) sweep() {
	now := l.cfg.Now()
	l.tickets.prune(now)
	l.revs.prune(now)
	l.occ.prune(now)
	l.owners.prune(now)
	l.pods.prune(now)
	l.streams.prune(now)
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for name, r := range s.rooms {
			r.mu.Lock()
			if r.epoch != "" && now.Sub(r.active) <= l.cfg.HistoryTTL {
				l.expireKeysLocked(r, now, 0)
				r.mu.Unlock()
				continue
			}
			l.forgetLocked(s, name, r)
			r.mu.Unlock()
		}
		s.mu.Unlock()
	}
}

// newEpoch returns 8 random characters of [0-9a-z].
// It draws from math/rand/v2's generator, seeded from the OS at start: an epoch must
// not repeat across restarts, not be secret, and a publish to a shared log draws a
// candidate every time, so it must be cheap.
func newEpoch() string {
	const space = 2821109907456 // 36^8
	var b [8]byte
	s := strconv.AppendUint(b[:0], rand.Uint64N(space), 36)
	for len(s) < 8 {
		s = append(s, 0)
		copy(s[1:], s)
		s[0] = '0'
	}
	return string(s)
}
