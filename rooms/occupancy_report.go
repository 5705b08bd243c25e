package rooms

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// OccupancyStore records, for the fleet, how many members this pod holds in each
// room. replay.MemoryLog and replay.RedisLog satisfy it.
type OccupancyStore interface {
	SetOccupancy(ctx context.Context, pod string, ttl time.Duration, counts []replay.RoomCount) error
}

// ReporterConfig configures a Reporter. Every zero value means "the default".
type ReporterConfig struct {
	// Pod names this pod in the records (replay.ValidPodID). Required.
	Pod string
	// Interval is how often the reporter compares the rooms' member counts with
	// what it recorded (default 2s). Records live for 3 intervals: a pod that dies
	// drops out of the fleet's view within that.
	Interval time.Duration
	// MaxWrites bounds the records one pass writes (default 40000): forgotten rooms
	// first, then changed counts, then refreshes, oldest first. A pod holding more
	// than about 3 × MaxWrites rooms lets some records lapse between refreshes.
	MaxWrites int
	// IOTimeout bounds each store call (default 5s).
	IOTimeout time.Duration
	// Logger receives the reporter's warnings (default slog.Default()).
	Logger *slog.Logger
}

// Reporter keeps this pod's occupancy records up to date: every Interval it writes
// the rooms whose member count changed, and refreshes each record before it lapses;
// a room whose last member leaves is forgotten at once. Close stops it and forgets
// every record it wrote.
//
// Concurrency: one goroutine, started by NewReporter and stopped by Close, does all
// the work; the registry only notes emptied rooms for it, without blocking.
type Reporter struct {
	g     *Registry
	store OccupancyStore
	cfg   ReporterConfig
	ttl   time.Duration

	// Owned by the reporter's goroutine (and by Close once it has stopped).
	recorded map[string]record
	gen      uint64
	buf      []RoomMembers
	failLog  time.Time

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// record is what the store holds for a room, as far as the reporter knows.
type record struct {
	members int
	at      time.Time // when it was written
	gen     uint64    // the last pass that found the room with members
}

// NewReporter starts reporting g's rooms to store.
func NewReporter(g *Registry, store OccupancyStore, cfg ReporterConfig) (*Reporter, error) {
	if cfg.Interval == 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.MaxWrites == 0 {
		cfg.MaxWrites = 40000
	}
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case g == nil || store == nil:
		return nil, errors.New("rooms: reporter: registry and store are required")
	case !replay.ValidPodID(cfg.Pod):
		return nil, fmt.Errorf("rooms: reporter: pod id %q: must be 1 to %d printable ASCII bytes without spaces", cfg.Pod, replay.MaxPodIDLen)
	case cfg.Interval < time.Millisecond || cfg.MaxWrites < 1 || cfg.IOTimeout <= 0:
		return nil, fmt.Errorf("rooms: reporter: interval %s, max writes %d and io timeout %s must be positive",
			cfg.Interval, cfg.MaxWrites, cfg.IOTimeout)
	}
	n := &g.emptyNotes
	n.mu.Lock()
	if n.on.Load() {
		n.mu.Unlock()
		return nil, errors.New("rooms: reporter: the registry has one already")
	}
	n.rooms = make(map[string]struct{})
	n.wake = make(chan struct{}, 1)
	n.on.Store(true)
	n.mu.Unlock()
	rp := &Reporter{g: g, store: store, cfg: cfg, ttl: 3 * cfg.Interval, recorded: make(map[string]record),
		stop: make(chan struct{}), done: make(chan struct{})}
	go rp.run(n.wake)
	return rp, nil
}

// TTL is how long a record lives unless written again: 3 × Interval.
func (rp *Reporter) TTL() time.Duration { return rp.ttl }

func (rp *Reporter) run(wake <-chan struct{}) {
	defer close(rp.done)
	t := time.NewTicker(rp.cfg.Interval)
	defer t.Stop()
	rp.pass(time.Now())
	for {
		select {
		case <-rp.stop:
			return
		case <-wake:
			rp.forgetEmptied(time.Now())
		case now := <-t.C:
			rp.pass(now)
		}
	}
}

// pass compares every room's member count with the records and writes the
// difference, within MaxWrites.
func (rp *Reporter) pass(now time.Time) {
	rp.gen++
	rp.buf = rp.g.appendCounts(rp.buf[:0])
	refreshAge := rp.cfg.Interval * 3 / 2
	var changed, due []replay.RoomCount
	for _, c := range rp.buf {
		rec, ok := rp.recorded[c.Room]
		switch {
		case !ok || rec.members != c.Members:
			changed = append(changed, replay.RoomCount{Room: c.Room, Members: c.Members})
		case now.Sub(rec.at) >= refreshAge:
			due = append(due, replay.RoomCount{Room: c.Room, Members: c.Members})
		}
		if ok {
			rec.gen = rp.gen
			rp.recorded[c.Room] = rec
		}
	}
	var writes []replay.RoomCount
	for room, rec := range rp.recorded {
		if rec.gen != rp.gen {
			writes = append(writes, replay.RoomCount{Room: room})
		}
	}
	slices.SortFunc(due, func(a, b replay.RoomCount) int {
		return rp.recorded[a.Room].at.Compare(rp.recorded[b.Room].at)
	})
	writes = append(append(writes, changed...), due...)
	if len(writes) > rp.cfg.MaxWrites {
		rp.warn(now, "occupancy: more records due than one pass writes; the rest wait for the next",
			"due", len(writes), "max_writes", rp.cfg.MaxWrites)
		writes = writes[:rp.cfg.MaxWrites]
	}
	rp.write(now, writes)
	if len(rp.buf) > 4*len(rp.recorded)+1024 {
		rp.buf = nil // do not keep a buffer sized for a peak long after it
	}
}

// forgetEmptied forgets at once the recorded rooms whose last member left.
func (rp *Reporter) forgetEmptied(now time.Time) {
	var writes []replay.RoomCount
	for _, room := range rp.g.emptyNotes.take() {
		if _, ok := rp.recorded[room]; ok && rp.g.roomMembers(room) == 0 {
			writes = append(writes, replay.RoomCount{Room: room})
		}
	}
	rp.write(now, writes)
}

// write records counts in batches; it stops at the first failure, leaving the rest
// for the next pass.
func (rp *Reporter) write(now time.Time, counts []replay.RoomCount) {
	for len(counts) > 0 {
		n := min(len(counts), replay.MaxOccupancyBatch)
		batch := counts[:n]
		counts = counts[n:]
		ctx, cancel := context.WithTimeout(context.Background(), rp.cfg.IOTimeout)
		err := rp.store.SetOccupancy(ctx, rp.cfg.Pod, rp.ttl, batch)
		cancel()
		if err != nil {
			rp.warn(now, "occupancy: writing records failed; retrying at the next pass", "rooms", len(batch), "err", err)
			return
		}
		for _, c := range batch {
			if c.Members == 0 {
				delete(rp.recorded, c.Room)
			} else {
				rp.recorded[c.Room] = record{members: c.Members, at: now, gen: rp.gen}
			}
		}
	}
}

// warn logs at most once a minute.
func (rp *Reporter) warn(now time.Time, msg string, args ...any) {
	if now.Sub(rp.failLog) < time.Minute {
		return
	}
	rp.failLog = now
	rp.cfg.Logger.Warn(msg, args...)
}

// Close stops the reporter and forgets every record it wrote, within ctx.
func (rp *Reporter) Close(ctx context.Context) error {
	var err error
	rp.closeOnce.Do(func() {
		close(rp.stop)
		<-rp.done
		n := &rp.g.emptyNotes
		n.mu.Lock()
		n.on.Store(false)
		n.mu.Unlock()
		var counts []replay.RoomCount
		for room := range rp.recorded {
			counts = append(counts, replay.RoomCount{Room: room})
		}
		slices.SortFunc(counts, func(a, b replay.RoomCount) int { return cmp.Compare(a.Room, b.Room) })
		for len(counts) > 0 && err == nil {
			k := min(len(counts), replay.MaxOccupancyBatch)
			if err = rp.store.SetOccupancy(ctx, rp.cfg.Pod, rp.ttl, counts[:k]); err != nil {
				err = fmt.Errorf("rooms: reporter: forget %d records: %w", len(counts), err)
			}
			counts = counts[k:]
		}
	})
	return err
}
