package rooms

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/flight"
)

// Read is what Registry.Since found after a position: replay.ReadOn's answer, and
// each event as an Item, whose encodings are shared with every member and reader that
// was given the same item.
type Read struct {
	replay.Read
	// Items holds Events[i] at i. They are shared: never modify them.
	Items []*Item
}

// recentEntry is one kept event, the item members were given.
type recentEntry struct {
	it   *Item
	size int64
}

// slotSize is what one slot of a ring costs, held or not: the entry and the item's
// own fields (the event's strings point into memory shared with the log).
const slotSize = 256

// entrySize is what an entry holds besides its slot: the event's body and, at most,
// one encoding of it per framing (Item.Encoded), counted before they are made.
func entrySize(it *Item) int64 {
	return int64(len(it.Event.Body)) + MaxFramings*int64(it.size())
}

// recent is a room's latest delivered events, oldest first: a ring of the events
// after base, dense in base's epoch, ending at the room's delivered position. Every
// field is guarded by the room's mutex.
type recent struct {
	ring  []recentEntry
	head  int // index of the oldest entry
	n     int
	bytes int64
	// base is the position before the oldest entry: the room's delivered position
	// when the window is empty.
	base replay.Position
	// baseTS is the publish time of the event at base when the window knows it (it
	// held that event), else 0.
	baseTS int64
	// gen counts the window's restarts (resyncs, epoch changes, anything that does
	// not continue it): a read that began before one must not fill the new window.
	gen    uint64
	filled bool        // the window fill of this generation ran or runs
	fill   *windowFill // the window fill in flight, if any
	// reads shares the room's log reads for resumes of one position and limit
	// (readKey) among concurrent callers.
	reads flight.Group[Read]
}

// readKey names one shared read of the log: the position after which it reads and
// how many events it asks for.
func readKey(after replay.Position, limit int) string {
	return after.String() + "/" + strconv.Itoa(limit)
}

// windowFill is one read that fills a window back, which the misses meanwhile share.
type windowFill struct {
	done chan struct{}
	rd   Read  // written before done is closed
	err  error // written before done is closed

	gen   uint64          // a window fill: the generation it fills
	from  replay.Position // a window fill: where it reads from
	limit int             // a window fill: how many events it asks for
}

func (c *recent) end() replay.Position {
	return replay.Position{Epoch: c.base.Epoch, Seq: c.base.Seq + uint64(c.n)}
}

// restartLocked empties the window and starts it again at pos.
func (c *recent) restartLocked(g *Registry, pos replay.Position) {
	var freed int64
	for c.n > 0 {
		freed += c.popLocked()
	}
	if freed != 0 {
		g.recentBytes.Add(-freed)
	}
	c.base, c.baseTS = pos, 0
	c.gen++
	c.filled = false
}

// dropLocked releases the window's memory: the room is gone, or the pod's bound
// left it nothing.
func (c *recent) dropLocked(g *Registry) {
	c.restartLocked(g, c.base)
	c.releaseRingLocked(g)
}

// releaseRingLocked frees the ring of an empty window.
func (c *recent) releaseRingLocked(g *Registry) {
	if n := int64(len(c.ring)) * slotSize; n != 0 {
		c.bytes -= n
		g.recentBytes.Add(-n)
	}
	c.ring, c.head = nil, 0
}

// evictLocked drops the oldest entry and returns the pod's kept bytes after it.
func (c *recent) evictLocked(g *Registry) int64 {
	return g.recentBytes.Add(-c.popLocked())
}

// popLocked drops the oldest entry and returns its size, which the caller takes off
// the pod's count.
func (c *recent) popLocked() int64 {
	e := &c.ring[c.head]
	size := e.size
	c.baseTS = e.it.TS()
	*e = recentEntry{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
	c.base.Seq++
	c.bytes -= size
	return size
}

// growLocked makes room for one more entry, up to limit entries, and returns the
// bytes the new slots add, which the caller adds to the pod's count.
func (c *recent) growLocked(limit int) int64 {
	if c.n < len(c.ring) {
		return 0
	}
	ring := make([]recentEntry, min(max(2*len(c.ring), 4), limit))
	for i := range c.n {
		ring[i] = c.ring[(c.head+i)%len(c.ring)]
	}
	added := int64(len(ring)-len(c.ring)) * slotSize
	c.ring, c.head = ring, 0
	c.bytes += added
	return added
}

// keepLocked adds the event the room just delivered to its window, dropping the
// oldest entries past the room's bounds and the pod's. An event that does not
// continue the window restarts it. The room's lock must be held.
func (g *Registry) keepLocked(r *room, it *Item) {
	if !g.recentOn {
		return
	}
	c := &r.recent
	if ev := &it.Event; ev.Epoch != c.base.Epoch || ev.Seq != c.base.Seq+uint64(c.n)+1 {
		c.restartLocked(g, replay.Position{Epoch: ev.Epoch, Seq: ev.Seq - 1})
	}
	size := entrySize(it)
	delta := size // one update of the pod's count for the common case
	if c.n == g.cfg.Recent {
		// Full: the newest takes the oldest's slot.
		e := &c.ring[c.head]
		delta -= e.size
		c.bytes -= e.size
		c.baseTS = e.it.TS()
		*e = recentEntry{it: it, size: size}
		if c.head++; c.head == len(c.ring) {
			c.head = 0
		}
		c.base.Seq++
	} else {
		delta += c.growLocked(g.cfg.Recent)
		i := c.head + c.n
		if i >= len(c.ring) {
			i -= len(c.ring)
		}
		c.ring[i] = recentEntry{it: it, size: size}
		c.n++
	}
	c.bytes += size
	total := g.recentBytes.Add(delta)
	for c.n > 0 && (c.bytes > g.cfg.RecentBytes || total > g.cfg.MaxRecentBytes) {
		total = c.evictLocked(g)
	}
	if c.n == 0 {
		c.releaseRingLocked(g)
	}
}

// prependLocked adds it, the event at base, before the oldest entry if the bounds
// allow it; it reports whether it did.
func (c *recent) prependLocked(g *Registry, it *Item) bool {
	size := entrySize(it)
	cost := size
	if c.n == len(c.ring) {
		cost += int64(min(max(2*len(c.ring), 4), g.cfg.Recent)-len(c.ring)) * slotSize // the slots growLocked adds
	}
	if c.n >= g.cfg.Recent || c.bytes+cost > g.cfg.RecentBytes || g.recentBytes.Load()+cost > g.cfg.MaxRecentBytes {
		return false
	}
	added := c.growLocked(g.cfg.Recent)
	c.head = (c.head - 1 + len(c.ring)) % len(c.ring)
	c.ring[c.head] = recentEntry{it: it, size: size}
	c.n++
	c.base.Seq--
	c.baseTS = 0
	c.bytes += size
	g.recentBytes.Add(size + added)
	return true
}

// readLocked serves up to limit events after `after` from the window, when the
// window holds that position.
func (c *recent) readLocked(after replay.Position, limit int) (Read, bool) {
	if c.base.Epoch == "" || after.Epoch != c.base.Epoch || after.Seq < c.base.Seq || after.Seq > c.base.Seq+uint64(c.n) {
		return Read{}, false
	}
	end := c.end()
	rd := Read{Read: replay.Read{From: after, Head: end}}
	k := min(int(end.Seq-after.Seq), max(limit, 0))
	if k == 0 {
		return rd, true
	}
	rd.Events, rd.Items = make([]replay.Event, k), make([]*Item, k)
	start := c.head + int(after.Seq-c.base.Seq)
	for i := range k {
		it := c.ring[(start+i)%len(c.ring)].it
		rd.Events[i], rd.Items[i] = it.Event, it
	}
	return rd, true
}

// Since reads up to limit events of room after `after`, as replay.ReadOn does, with
// each event's item. A room this pod holds serves the read from its latest events
// when they hold `after`; concurrent reads that miss them share one read of the log:
// one per room and generation that fills the window back to Config.Recent events,
// else one per position and limit. The window follows the room's delivered order, so
// what it serves is what members were given. Call it after joining the room: a read
// from the window ends at what the room has delivered, and the member's queue holds
// what comes after.
func (g *Registry) Since(ctx context.Context, room string, after replay.Position, limit int) (Read, error) {
	r := g.lookup(room)
	if r == nil || !g.recentOn {
		g.recentMisses.Add(1)
		return g.readLog(ctx, room, after, limit)
	}
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		if r.gone {
			r.mu.Unlock()
			g.recentMisses.Add(1)
			return g.readLog(ctx, room, after, limit)
		}
		if rd, ok := r.recent.readLocked(after, limit); ok {
			r.mu.Unlock()
			g.recentHits.Add(1)
			return rd, nil
		}
		var f *windowFill
		run := false
		if attempt < maxFillAttempts {
			f, run = g.windowFillLocked(r, after)
		}
		if f == nil {
			return g.sharedReadLocked(ctx, r, after, limit)
		}
		r.mu.Unlock()
		if run {
			g.fillWindow(r, f)
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return Read{}, fmt.Errorf("rooms: since %q: %w", room, ctx.Err())
		}
		if f.err != nil && attempt+1 >= maxFillAttempts {
			return Read{}, f.err
		}
	}
}

// maxFillAttempts bounds how many window fills one read waits for or runs: a failed
// fill is tried again by the next reader.
const maxFillAttempts = 3

// lookup returns the room when it is open, else nil.
func (g *Registry) lookup(name string) *room {
	s := g.shard(name)
	s.mu.Lock()
	r := s.rooms[name]
	s.mu.Unlock()
	if r == nil || !isClosed(r.ready) || r.err != nil {
		return nil
	}
	return r
}

// windowFillLocked returns the window fill that would bring `after` into the window,
// and whether the caller is to run it: none when `after` is outside the window's
// reach or the fill of this generation has run already.
func (g *Registry) windowFillLocked(r *room, after replay.Position) (*windowFill, bool) {
	c := &r.recent
	end := c.end()
	if end.Epoch == "" || after.Epoch != end.Epoch || after.Seq >= c.base.Seq || end.Seq-after.Seq > uint64(g.cfg.Recent) {
		return nil, false
	}
	if c.fill != nil && c.fill.gen == c.gen {
		return c.fill, false
	}
	if c.filled {
		return nil, false
	}
	from := replay.Position{Epoch: end.Epoch, Seq: end.Seq - min(end.Seq, uint64(g.cfg.Recent))}
	limit := int(c.base.Seq - from.Seq)
	if c.n > 0 {
		limit++ // the oldest kept event too, to check the log still holds it
	}
	f := &windowFill{done: make(chan struct{}), gen: c.gen, from: from, limit: limit}
	c.fill, c.filled = f, true
	return f, true
}

// fillWindow reads the events before the window's oldest from the log and puts the
// ones that connect in front of it. A window start the log no longer holds is read
// again from halfway, twice at most; failing that, the window keeps what the
// fan-out gives it.
func (g *Registry) fillWindow(r *room, f *windowFill) {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.IOTimeout)
	defer cancel()
	from, limit := f.from, f.limit
	var evs []replay.Event
	var err error
	for try := 0; ; try++ {
		evs, _, err = countedReader{g}.Since(ctx, r.name, from, limit)
		if !errors.Is(err, replay.ErrGap) || try == 2 || limit < 2 {
			break
		}
		step := uint64(limit / 2)
		from.Seq += step
		limit -= int(step)
	}
	if errors.Is(err, replay.ErrGap) {
		evs, err = nil, nil
	}
	r.mu.Lock()
	if err == nil && !r.gone && r.recent.gen == f.gen {
		g.mergeLocked(r, from, evs)
	}
	if r.recent.fill == f {
		r.recent.fill = nil
		if err != nil && r.recent.gen == f.gen {
			r.recent.filled = false // the next reader tries again
		}
	}
	r.mu.Unlock()
	if err != nil {
		f.err = fmt.Errorf("rooms: since %q: %w", r.name, err)
		g.cfg.Logger.Warn("room history read for resumes failed", "room", r.name, "err", err)
	}
	close(f.done)
}

// mergeLocked puts the events of a window fill that read from `from` in front of the
// window, newest first, when they connect to it: the log's events at the window's
// base and at its oldest entry must be the ones the window knows (same publish
// time), else the history forked and the repair will tell.
func (g *Registry) mergeLocked(r *room, from replay.Position, evs []replay.Event) {
	c := &r.recent
	at := func(seq uint64) int { // index of seq in evs, or -1
		i := int(seq - from.Seq - 1)
		if seq <= from.Seq || i >= len(evs) || evs[i].Seq != seq || evs[i].Epoch != c.base.Epoch {
			return -1
		}
		return i
	}
	i := at(c.base.Seq)
	if i < 0 || (c.baseTS != 0 && evs[i].TS != c.baseTS) {
		return
	}
	if j := at(c.base.Seq + 1); j >= 0 && c.n > 0 && evs[j].TS != c.ring[c.head].it.TS() {
		return
	}
	for ; i >= 0 && evs[i].Seq == c.base.Seq && evs[i].Epoch == c.base.Epoch; i-- {
		if !c.prependLocked(g, newItem(evs[i])) {
			return
		}
	}
}

// sharedReadLocked reads from the log, sharing the read with concurrent callers of
// the same position and limit. A caller never takes the answer of a read that began
// before it came (it may have joined the room after that read saw the log): it waits
// for the next one, which starts when the running one ends. It is called with the
// room's lock held and releases it.
func (g *Registry) sharedReadLocked(ctx context.Context, r *room, after replay.Position, limit int) (Read, error) {
	r.mu.Unlock()
	g.recentMisses.Add(1)
	rd, err := r.recent.reads.Do(ctx, readKey(after, limit), nil, func() (Read, error) {
		// Detached from the caller: others wait on this read.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.IOTimeout)
		defer cancel()
		return g.readLog(rctx, r.name, after, limit)
	})
	if err != nil && ctx.Err() != nil {
		return Read{}, fmt.Errorf("rooms: since %q: %w", r.name, ctx.Err())
	}
	return rd, err
}

// readLog reads from the log with replay.ReadOn, each event as an item of its own
// (shared by the readers that share this read).
func (g *Registry) readLog(ctx context.Context, room string, after replay.Position, limit int) (Read, error) {
	rd, err := replay.ReadOn(ctx, countedReader{g}, room, after, limit)
	if err != nil {
		return Read{}, err
	}
	out := Read{Read: rd, Items: make([]*Item, len(rd.Events))}
	for i, ev := range rd.Events {
		out.Items[i] = newItem(ev)
	}
	return out, nil
}

// countedReader is the registry's log, counting the history reads made for resumes.
type countedReader struct{ g *Registry }

func (c countedReader) Since(ctx context.Context, room string, after replay.Position, limit int) ([]replay.Event, replay.Position, error) {
	c.g.historyReads.Add(1)
	return c.g.log.Since(ctx, room, after, limit)
}
