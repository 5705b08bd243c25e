package rooms

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// Bus is the doorbell the registry subscribes rooms on: one subscription per room
// per process. replay.Log implementations satisfy it.
type Bus interface {
	// Subscribe calls ring for every event of room from now on, in order; a ring
	// with a zero Event means "events may have been missed: read the log". ring must
	// not block.
	Subscribe(ctx context.Context, room string, ring func(replay.Event)) error
	Unsubscribe(ctx context.Context, room string) error
}

// Log is the history the registry repairs gaps from.
type Log interface {
	Since(ctx context.Context, room string, after replay.Position, limit int) ([]replay.Event, replay.Position, error)
	Head(ctx context.Context, room string) (replay.Position, error)
}

// Config configures a Registry. Every zero value means "the default".
type Config struct {
	// Queue is each member's queue length, in events (default 256).
	Queue int
	// QueueBytes bounds the bytes of the items (Item.size: an encoding, at most) waiting in each member's queue (default 4 MiB).
	QueueBytes int64
	// MaxQueuedBytes bounds the bytes of the items waiting in all members' queues together
	// (zero: no bound). A scan every BudgetInterval closes the members with the most
	// bytes waiting first, as slow consumers, until the sum is within the bound.
	MaxQueuedBytes int64
	// BudgetInterval is how often that scan runs (default 200ms).
	BudgetInterval time.Duration
	// SampleInterval is how often the members' queue depths are sampled for the
	// observer's QueueDepth (default 1s), and SampleMembers how many members one
	// sample takes at most (default 1024).
	SampleInterval time.Duration
	SampleMembers  int
	// Linger is how long an empty room keeps its bus subscription (default 2s; a
	// negative value unsubscribes at once).
	Linger time.Duration
	// RepairBatch is how many events one repair read asks the log for (default 256).
	RepairBatch int
	// IOTimeout bounds each bus or log call the registry makes (default 5s).
	IOTimeout time.Duration
	// Recent is how many of its latest events each room keeps to serve resumes from
	// (default 1024). Keep it at or below the log's history: a room's first resume
	// that misses them reads that far back.
	Recent int
	// RecentBytes bounds one room's kept events: their bodies and the encodings their
	// items may keep (MaxFramings, counted before they are made), and 256 bytes for
	// each slot of the room's ring, which grows by doubling up to Recent slots
	// (default 1 MiB).
	RecentBytes int64
	// MaxRecentBytes bounds the kept events of all rooms together, in the same
	// measure (default 64 MiB; negative: no events are kept, every resume reads the
	// log). A room that keeps an event past it drops its own oldest.
	MaxRecentBytes int64
	// Policy names each room's queue policy: what a member's full queue does with a
	// new item (nil: PolicyClose for every room). It is called once when a room
	// opens, under a shard lock: it must be quick and must not call the registry.
	Policy func(room string) Policy
	// Logger receives the registry's own errors (default slog.Default()).
	Logger *slog.Logger
}

// ErrClosed is returned by Join after Close.
var ErrClosed = errors.New("rooms: registry closed")

const regShards = 64

// lagSample: one ring in lagSample of each room is timed for Observer.FanoutLag.
const lagSample = 8

// Registry is the pod-local room registry. See the package documentation.
type Registry struct {
	bus  Bus
	log  Log
	cfg  Config
	seed maphash.Seed

	shards [regShards]shard

	members       atomic.Int64 // members in rooms, closed or not
	open          atomic.Int64 // members not closed yet
	rooms         atomic.Int64
	subscriptions atomic.Int64
	slowDrops     atomic.Uint64              // members closed because their own queue overflowed
	policyDrops   [NumPolicies]atomic.Uint64 // events dropped from full queues, by policy
	budgetDrops   atomic.Uint64
	queuedBytes   atomic.Int64  // at the last budget scan
	repairs       atomic.Uint64 // repairs started by a doorbell (a gap, a new epoch, a zero ring)
	gapsRepaired  atomic.Uint64 // repairs that filled a gap from the log
	resyncs       atomic.Uint64
	forks         atomic.Uint64
	closed        atomic.Bool

	obs atomic.Pointer[Observer] // see Observe

	recentOn     bool         // rooms keep their latest events
	recentBytes  atomic.Int64 // kept by all rooms
	recentHits   atomic.Uint64
	recentMisses atomic.Uint64
	historyReads atomic.Uint64

	emptyNotes emptyNotes // rooms whose last member left, for a Reporter (occupancy.go)

	wg   sync.WaitGroup // open, repair, expire and budget goroutines
	stop chan struct{}
}

type shard struct {
	mu      sync.Mutex
	rooms   map[string]*room
	leaving map[string]chan struct{} // rooms whose Unsubscribe is in flight
}

type room struct {
	name  string
	ready chan struct{} // closed once subscribed and baselined, or failed
	err   error         // written before ready is closed

	mu        sync.Mutex
	members   map[*Member]struct{}
	refs      int // members plus joiners waiting for ready
	gone      bool
	lingerGen uint64
	linger    *time.Timer
	pos       replay.Position // last position delivered to members
	posTS     int64           // publish time of the event at pos; 0 when unknown
	syncing   bool            // a repair (or the initial baseline) is running
	repairAt  time.Time       // when the ring that started the running repair came
	rings     atomic.Uint32   // rings heard, for sampling the fan-out lag
	dirty     bool            // a ring arrived while syncing
	smallAvg  int64           // running mean size of the small items fanned out (see Member.queuedLocked)
	recent    recent          // the latest events delivered, for resumes (recent.go)
	policy    Policy          // the members' queue policy (Config.Policy)
}

// New returns a Registry over bus and log.
func New(bus Bus, log Log, cfg Config) (*Registry, error) {
	if cfg.Queue == 0 {
		cfg.Queue = 256
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = 4 << 20
	}
	if cfg.Linger == 0 {
		cfg.Linger = 2 * time.Second
	}
	if cfg.RepairBatch == 0 {
		cfg.RepairBatch = 256
	}
	if cfg.BudgetInterval == 0 {
		cfg.BudgetInterval = 200 * time.Millisecond
	}
	if cfg.SampleInterval == 0 {
		cfg.SampleInterval = time.Second
	}
	if cfg.SampleMembers == 0 {
		cfg.SampleMembers = 1024
	}
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Recent == 0 {
		cfg.Recent = 1024
	}
	if cfg.RecentBytes == 0 {
		cfg.RecentBytes = 1 << 20
	}
	if cfg.MaxRecentBytes == 0 {
		cfg.MaxRecentBytes = 64 << 20
	}
	switch {
	case bus == nil || log == nil:
		return nil, errors.New("rooms: bus and log are required")
	case cfg.Queue < 1 || cfg.QueueBytes < 1 || cfg.RepairBatch < 1 || cfg.IOTimeout < 0:
		return nil, fmt.Errorf("rooms: queue %d, queue bytes %d, repair batch %d and io timeout %s must be positive",
			cfg.Queue, cfg.QueueBytes, cfg.RepairBatch, cfg.IOTimeout)
	case cfg.MaxQueuedBytes < 0 || cfg.BudgetInterval < 0:
		return nil, fmt.Errorf("rooms: max queued bytes %d and budget interval %s must not be negative",
			cfg.MaxQueuedBytes, cfg.BudgetInterval)
	case cfg.SampleInterval < 0 || cfg.SampleMembers < 1:
		return nil, fmt.Errorf("rooms: sample interval %s must not be negative and sample members %d must be positive",
			cfg.SampleInterval, cfg.SampleMembers)
	case cfg.Recent < 1 || cfg.RecentBytes < 1:
		return nil, fmt.Errorf("rooms: recent %d and recent bytes %d must be positive", cfg.Recent, cfg.RecentBytes)
	}
	g := &Registry{bus: bus, log: log, cfg: cfg, seed: maphash.MakeSeed(), stop: make(chan struct{}),
		recentOn: cfg.MaxRecentBytes > 0}
	for i := range g.shards {
		g.shards[i].rooms = make(map[string]*room)
		g.shards[i].leaving = make(map[string]chan struct{})
	}
	if cfg.MaxQueuedBytes > 0 {
		g.every(cfg.BudgetInterval, func() { g.enforceBudget() }) // enforces MaxQueuedBytes
	}
	g.every(cfg.SampleInterval, g.sampleQueueDepths)
	return g, nil
}

// every runs fn every interval in a goroutine of its own until Close.
func (g *Registry) every(interval time.Duration, fn func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

func (g *Registry) shard(name string) *shard {
	return &g.shards[maphash.String(g.seed, name)%regShards]
}

// Join makes a new member of room, subscribing the room on the bus if this is its
// first member. It returns once the room is subscribed and baselined, so history the
// caller reads afterwards overlaps whatever the member receives live.
func (g *Registry) Join(ctx context.Context, name string) (*Member, error) {
	for {
		if g.closed.Load() {
			return nil, ErrClosed
		}
		r, wait, err := g.ref(name)
		if err != nil {
			return nil, err
		}
		if wait != nil {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("rooms: join %q: %w", name, ctx.Err())
			}
		}
		select {
		case <-r.ready:
		case <-ctx.Done():
			g.unref(r)
			return nil, fmt.Errorf("rooms: join %q: %w", name, ctx.Err())
		}
		if r.err != nil {
			return nil, r.err
		}
		m := newMember(r, &g.cfg, &g.open)
		r.mu.Lock()
		if r.gone {
			r.mu.Unlock()
			if g.closed.Load() {
				return nil, ErrClosed
			}
			continue
		}
		g.members.Add(1)
		g.open.Add(1)
		m.start = r.pos
		r.members[m] = struct{}{}
		r.mu.Unlock()
		return m, nil
	}
}

// ref takes a reference on the room, creating and opening it when needed. When the
// room's previous subscription is still being released it returns a channel to wait
// on instead. Close sets closed before it sweeps the shards, so checking it under the
// shard lock keeps a room from being created behind Close's back.
func (g *Registry) ref(name string) (*room, <-chan struct{}, error) {
	s := g.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.closed.Load() {
		return nil, nil, ErrClosed
	}
	if r := s.rooms[name]; r != nil {
		r.mu.Lock()
		r.refs++
		r.stopLingerLocked(g)
		r.mu.Unlock()
		return r, nil, nil
	}
	if wait := s.leaving[name]; wait != nil {
		return nil, wait, nil
	}
	r := &room{name: name, ready: make(chan struct{}), members: make(map[*Member]struct{}), refs: 1, syncing: true}
	if g.cfg.Policy != nil {
		r.policy = g.cfg.Policy(name)
	}
	s.rooms[name] = r
	g.rooms.Add(1)
	g.wg.Add(1)
	go g.openRoom(r)
	return r, nil, nil
}

// openRoom subscribes the room and reads its head as the baseline for gap detection. On
// failure the room is removed and every waiting joiner gets the error.
func (g *Registry) openRoom(r *room) {
	defer g.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.IOTimeout)
	defer cancel()
	err := g.bus.Subscribe(ctx, r.name, r.ringer(g))
	var head replay.Position
	if err == nil {
		if head, err = g.log.Head(ctx, r.name); err != nil {
			// Roll back on a fresh deadline: the subscribe may have used up ctx.
			rctx, rcancel := context.WithTimeout(context.Background(), g.cfg.IOTimeout)
			_ = g.bus.Unsubscribe(rctx, r.name)
			rcancel()
		}
	}
	if err != nil {
		s := g.shard(r.name)
		s.mu.Lock()
		delete(s.rooms, r.name)
		s.mu.Unlock()
		g.rooms.Add(-1)
		r.mu.Lock()
		r.gone = true
		r.mu.Unlock()
		r.err = fmt.Errorf("rooms: join %q: %w", r.name, err)
		close(r.ready)
		return
	}
	g.subscriptions.Add(1)
	r.mu.Lock()
	if r.gone { // the registry closed while the room was opening
		r.err = ErrClosed
		close(r.ready)
		r.mu.Unlock()
		g.unsubscribe(r.name)
		return
	}
	r.pos = head
	r.recent.restartLocked(g, head)
	if r.dirty {
		g.startRepairLocked(r, time.Now())
	} else {
		r.syncing = false
	}
	close(r.ready)
	if r.refs == 0 {
		r.startLingerLocked(g)
	}
	r.mu.Unlock()
}

// unref drops a joiner's reference taken by ref.
func (g *Registry) unref(r *room) {
	r.mu.Lock()
	r.refs--
	if r.refs == 0 && isClosed(r.ready) && r.err == nil && !r.gone {
		r.startLingerLocked(g)
	}
	r.mu.Unlock()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Leave removes m from its room and closes it with ReasonClientGone unless it was
// closed already. The last member's leave starts the room's linger.
func (g *Registry) Leave(m *Member) {
	m.Close(ReasonClientGone)
	r := m.room
	r.mu.Lock()
	if _, ok := r.members[m]; ok {
		delete(r.members, m)
		g.members.Add(-1)
		if len(r.members) == 0 {
			g.emptyNotes.emptied(r.name)
		}
		r.refs--
		if r.refs == 0 && !r.gone {
			r.startLingerLocked(g)
		}
	}
	r.mu.Unlock()
}

func (r *room) startLingerLocked(g *Registry) {
	r.stopLingerLocked(g)
	gen := r.lingerGen
	g.wg.Add(1)
	r.linger = time.AfterFunc(max(g.cfg.Linger, 0), func() { g.expire(r, gen) })
}

func (r *room) stopLingerLocked(g *Registry) {
	r.lingerGen++
	if r.linger != nil && r.linger.Stop() {
		g.wg.Done()
	}
	r.linger = nil
}

// expire unsubscribes a room that stayed empty for the linger. A join that arrives
// meanwhile waits for the unsubscribe to finish before it subscribes again.
func (g *Registry) expire(r *room, gen uint64) {
	defer g.wg.Done()
	s := g.shard(r.name)
	s.mu.Lock()
	r.mu.Lock()
	if r.lingerGen != gen || r.refs > 0 || r.gone {
		r.mu.Unlock()
		s.mu.Unlock()
		return
	}
	r.gone = true
	r.linger = nil
	r.recent.dropLocked(g)
	r.mu.Unlock()
	delete(s.rooms, r.name)
	left := make(chan struct{})
	s.leaving[r.name] = left
	s.mu.Unlock()

	g.unsubscribe(r.name)

	s.mu.Lock()
	delete(s.leaving, r.name)
	s.mu.Unlock()
	close(left)
}

func (g *Registry) unsubscribe(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.IOTimeout)
	defer cancel()
	if err := g.bus.Unsubscribe(ctx, name); err != nil {
		g.cfg.Logger.Warn("room unsubscribe failed", "room", name, "err", err)
	}
	g.subscriptions.Add(-1)
	g.rooms.Add(-1)
}

// ringer returns the doorbell callback for r. It never blocks: the fast path fans out
// under the room lock with non-blocking sends; anything out of order starts a repair.
func (r *room) ringer(g *Registry) func(replay.Event) {
	return func(ev replay.Event) {
		// One ring in lagSample takes the time: reading the clock twice per event
		// costs as much as fanning it out to a member.
		lag := g.observer().FanoutLag
		var rang time.Time
		if lag != nil && (r.rings.Add(1)-1)%lagSample == 0 {
			rang = time.Now()
		}
		var it *Item
		if ev.Seq != 0 {
			it = newItem(ev)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case r.gone:
		case r.syncing:
			r.dirty = true
		case it == nil:
			g.startRepairLocked(r, time.Now())
		case ev.Epoch == r.pos.Epoch && ev.Seq <= r.pos.Seq:
			// Already delivered (a repair read it first).
		case ev.Epoch == r.pos.Epoch && ev.Seq == r.pos.Seq+1,
			r.pos == (replay.Position{}) && ev.Seq == 1:
			r.pos, r.posTS = it.Pos, it.TS()
			g.fanoutLocked(r, it)
			g.keepLocked(r, it)
			if !rang.IsZero() {
				lag(time.Since(rang))
			}
		default:
			g.startRepairLocked(r, time.Now())
		}
	}
}

// startRepairLocked starts a repair for a ring that came at rang.
func (g *Registry) startRepairLocked(r *room, rang time.Time) {
	r.syncing = true
	r.dirty = false
	r.repairAt = rang
	g.repairs.Add(1)
	g.wg.Add(1)
	go g.repair(r)
}

// repair reads the log from the room's last delivered position and delivers in order
// until it is caught up and no ring arrived meanwhile.
func (g *Registry) repair(r *room) {
	defer g.wg.Done()
	backoff := 50 * time.Millisecond
	filled := false // a pass delivered missed events from the log: one gap repaired
	for {
		r.mu.Lock()
		if r.gone {
			r.syncing = false
			r.mu.Unlock()
			return
		}
		from, fromTS := r.pos, r.posTS
		r.dirty = false
		r.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), g.cfg.IOTimeout)
		rd, err := g.readAfter(ctx, r.name, from, fromTS)
		cancel()
		if err != nil {
			g.cfg.Logger.Warn("room repair read failed", "room", r.name, "err", err)
			select {
			case <-time.After(backoff/2 + rand.N(backoff/2+1)):
			case <-g.stop:
				return
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if rd.Fork || (rd.Resync && from.Epoch != "" && rd.From.Epoch != from.Epoch) {
			// The history members were given changed under them.
			g.forks.Add(1)
		}
		if rd.Fork {
			g.cfg.Logger.Warn("room history forked: the log lost or replaced events members saw; resyncing",
				"room", r.name, "seq", from.Seq)
		}
		items := make([]*Item, len(rd.Events))
		for i, ev := range rd.Events {
			items[i] = newItem(ev)
		}

		r.mu.Lock()
		delivered := 0
		if r.pos == from {
			if rd.Resync { // the log cannot fill the hole
				r.pos, r.posTS = rd.From, 0
				g.resyncs.Add(1)
				g.fanoutLocked(r, &Item{Pos: rd.From, Resync: true, Fork: rd.Fork, After: from})
				r.recent.restartLocked(g, rd.From)
			}
			if !filled && !rd.Resync && len(items) > 0 {
				// Counted before members see the events.
				filled = true
				g.gapsRepaired.Add(1)
			}
			for _, it := range items {
				r.pos, r.posTS = it.Pos, it.TS()
				g.fanoutLocked(r, it)
				g.keepLocked(r, it)
			}
			delivered = len(items)
		}
		rang := r.repairAt
		caughtUp := len(rd.Events) < g.cfg.RepairBatch
		done := caughtUp && !r.dirty
		if done {
			r.syncing = false
		}
		r.mu.Unlock()
		if lag := g.observer().FanoutLag; lag != nil && delivered > 0 && !rang.IsZero() {
			d := time.Since(rang)
			for range delivered {
				lag(d)
			}
		}
		if done {
			return
		}
	}
}

// readAfter reads the events after from, resyncing by replay.ReadOn's rule when from
// cannot be continued. When it knows the publish time of the event at from, it reads
// that event too and checks that it is the one members saw: a primary that failed
// over before replicating an event may have given its seq to another event, and a
// repair that trusted the seq alone would skip that one silently. A mismatch is a
// fork: a resync at the head, which readers take even when it is behind them.
func (g *Registry) readAfter(ctx context.Context, room string, from replay.Position, fromTS int64) (replay.Read, error) {
	if from.Seq == 0 || fromTS == 0 {
		return replay.ReadOn(ctx, g.log, room, from, g.cfg.RepairBatch)
	}
	prev := replay.Position{Epoch: from.Epoch, Seq: from.Seq - 1}
	evs, head, err := g.log.Since(ctx, room, prev, g.cfg.RepairBatch+1)
	switch {
	case errors.Is(err, replay.ErrGap):
		// The event before from is trimmed (or the epoch is gone): read without
		// the check.
		return replay.ReadOn(ctx, g.log, room, from, g.cfg.RepairBatch)
	case err != nil:
		return replay.Read{}, err
	case len(evs) == 0 || evs[0].Seq != from.Seq || evs[0].TS != fromTS:
		return replay.Read{From: head, Head: head, Resync: true, Fork: true}, nil
	}
	return replay.Read{Events: evs[1:], From: from, Head: head}, nil
}

// fanoutLocked offers it to every open member without blocking. A member that cannot
// take it is closed as a slow consumer (its stream leaves and the client resumes by
// id), unless its room's policy makes room for it by dropping older items (shedLocked).
func (g *Registry) fanoutLocked(r *room, it *Item) {
	if n := int64(it.size()); n <= g.cfg.QueueBytes/int64(g.cfg.Queue) {
		// A mean over about the last 16 small items, for the budget's estimate;
		// the first one sets it.
		if r.smallAvg == 0 {
			r.smallAvg = n
		} else {
			r.smallAvg += (n - r.smallAvg) / 16
		}
	}
	for m := range r.members {
		if m.reason.Load() != 0 {
			continue
		}
		if m.offerLocked(it) {
			continue
		}
		if m.sheds() {
			g.policyDrops[r.policy].Add(uint64(m.shedLocked(it)))
			continue
		}
		if m.Close(ReasonSlowConsumer) {
			g.slowDrops.Add(1)
		}
	}
}
