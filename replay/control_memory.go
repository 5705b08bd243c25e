package replay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// memTickets is a MemoryLog's ticket store (Tickets): one pod's, on the log's clock.
type memTickets struct {
	l *MemoryLog

	mu          sync.Mutex
	tickets     map[string]memTicket
	ticketBytes int64
	pruned      time.Time // when expired tickets were last pruned because of the cap
}

// memRevocations is a MemoryLog's revocations (Revocations): one pod's, on the
// log's clock. Lock order: a watcher's mu, then memRevocations.mu; fn runs under the
// watcher's mu only.
type memRevocations struct {
	l *MemoryLog

	mu       sync.Mutex
	revs     map[memRevKey]time.Time
	watchers map[*memWatcher]struct{}
}

type memTicket struct {
	value   []byte
	expires time.Time
}

// memRevKey identifies a revocation as Redis does: kind, value and At.
type memRevKey struct {
	kind, value string
	at          int64 // Unix ms
}

type memWatcher struct {
	mu      sync.Mutex
	fn      func(Revocation)
	stopped bool
}

var (
	_ Tickets     = (*memTickets)(nil)
	_ Revocations = (*memRevocations)(nil)
)

// initLocked makes the maps on first use.
func (c *memRevocations) initLocked() {
	if c.revs == nil {
		c.revs = make(map[memRevKey]time.Time)
		c.watchers = make(map[*memWatcher]struct{})
	}
}

// PutTicket implements Tickets. At most 100 000 live tickets holding 64 MiB of
// values: past either, it returns ErrFull.
func (c *memTickets) PutTicket(ctx context.Context, id string, value []byte, ttl time.Duration) error {
	if c.l.closed.Load() {
		return ErrClosed
	}
	if !validTicket(id, value, ttl) {
		return fmt.Errorf("replay: put ticket: %w", ErrInvalid)
	}
	now := c.l.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tickets == nil {
		c.tickets = make(map[string]memTicket)
	}
	if t, ok := c.tickets[id]; ok {
		if now.Before(t.expires) {
			return fmt.Errorf("replay: put ticket: id already in use: %w", ErrInvalid)
		}
		c.dropTicketLocked(id, t)
	}
	full := func() bool {
		return len(c.tickets) >= maxTickets || c.ticketBytes+int64(len(value)) > maxTicketBytes
	}
	// Pruning walks every ticket: at most once a second, and only when full.
	if full() && now.Sub(c.pruned) >= time.Second {
		c.pruneTicketsLocked(now)
		c.pruned = now
	}
	if full() {
		return fmt.Errorf("replay: put ticket: %d tickets held: %w", len(c.tickets), ErrFull)
	}
	c.tickets[id] = memTicket{value: slices.Clone(value), expires: now.Add(ttl)}
	c.ticketBytes += int64(len(value))
	return nil
}

// TakeTicket implements Tickets.
func (c *memTickets) TakeTicket(ctx context.Context, id string) ([]byte, error) {
	return c.readTicket("take", id, true)
}

// PeekTicket implements Tickets.
func (c *memTickets) PeekTicket(ctx context.Context, id string) ([]byte, error) {
	return c.readTicket("peek", id, false)
}

// readTicket returns a copy of ticket id's value, and with take forgets the ticket
// (verb names the call in errors).
func (c *memTickets) readTicket(verb, id string, take bool) ([]byte, error) {
	if c.l.closed.Load() {
		return nil, ErrClosed
	}
	if !validTicketID(id) {
		return nil, fmt.Errorf("replay: %s ticket: %w", verb, ErrInvalid)
	}
	now := c.l.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tickets[id]
	if !ok {
		return nil, ErrTicketUnknown
	}
	if take || !now.Before(t.expires) {
		c.dropTicketLocked(id, t)
	}
	if !now.Before(t.expires) {
		return nil, ErrTicketUnknown
	}
	return append([]byte{}, t.value...), nil
}

func (c *memTickets) dropTicketLocked(id string, t memTicket) {
	delete(c.tickets, id)
	c.ticketBytes -= int64(len(t.value))
}

// pruneTicketsLocked forgets expired tickets.
func (c *memTickets) pruneTicketsLocked(now time.Time) {
	for id, t := range c.tickets {
		if !now.Before(t.expires) {
			c.dropTicketLocked(id, t)
		}
	}
}

// prune forgets expired tickets; the sweeper calls it.
func (c *memTickets) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneTicketsLocked(now)
}

// prune forgets expired revocations; the sweeper calls it.
func (c *memRevocations) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, until := range c.revs {
		if !now.Before(until) {
			delete(c.revs, k)
		}
	}
}

// Revoke implements Revocations. It keeps up to 100 000 revocations in force; past
// that, the one that ends first is forgotten first. A revocation whose Until has
// passed already is accepted and forgotten.
func (c *memRevocations) Revoke(ctx context.Context, r Revocation) error {
	if c.l.closed.Load() {
		return ErrClosed
	}
	if !validRevocation(r) {
		return fmt.Errorf("replay: revoke: %w", ErrInvalid)
	}
	r = normalRevocation(r)
	now := c.l.cfg.Now()
	if !now.Before(r.Until) {
		return nil
	}
	c.mu.Lock()
	c.initLocked()
	k := memRevKey{kind: r.Kind, value: r.Value, at: r.At.UnixMilli()}
	if until, ok := c.revs[k]; !ok || until.Before(r.Until) {
		if !ok && len(c.revs) >= maxRevocations {
			c.evictLocked(now)
		}
		c.revs[k] = r.Until
	}
	watchers := make([]*memWatcher, 0, len(c.watchers))
	for w := range c.watchers {
		watchers = append(watchers, w)
	}
	c.mu.Unlock()
	for _, w := range watchers {
		c.deliver(w, []Revocation{r})
	}
	return nil
}

// evictLocked makes room for one revocation: the expired ones go, else the one
// that ends first.
func (c *memRevocations) evictLocked(now time.Time) {
	var first memRevKey
	var firstUntil time.Time
	for k, until := range c.revs {
		if !now.Before(until) {
			delete(c.revs, k)
			continue
		}
		if firstUntil.IsZero() || until.Before(firstUntil) {
			first, firstUntil = k, until
		}
	}
	if len(c.revs) >= maxRevocations {
		delete(c.revs, first)
	}
}

// WatchRevocations implements Revocations. fn runs on the goroutine that calls
// WatchRevocations (for the set in force) and on those that call Revoke.
func (c *memRevocations) WatchRevocations(ctx context.Context, fn func(Revocation)) {
	if c.l.closed.Load() || ctx.Err() != nil {
		return
	}
	w := &memWatcher{fn: fn}
	// Holding w.mu until the set is delivered makes a concurrent Revoke report after it.
	w.mu.Lock()
	c.mu.Lock()
	c.initLocked()
	c.watchers[w] = struct{}{}
	now := c.l.cfg.Now()
	set := make([]Revocation, 0, len(c.revs))
	for k, until := range c.revs {
		if now.Before(until) {
			set = append(set, Revocation{Kind: k.kind, Value: k.value, At: time.UnixMilli(k.at), Until: until})
		}
	}
	c.mu.Unlock()
	slices.SortFunc(set, func(a, b Revocation) int { return a.Until.Compare(b.Until) })
	c.deliverLocked(w, set)
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		c.mu.Lock()
		delete(c.watchers, w)
		c.mu.Unlock()
	})
}

// deliver calls w's fn with rs, one at a time, unless w stopped or the log closed.
func (c *memRevocations) deliver(w *memWatcher, rs []Revocation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.deliverLocked(w, rs)
}

func (c *memRevocations) deliverLocked(w *memWatcher, rs []Revocation) {
	for _, r := range rs {
		if w.stopped || c.l.closed.Load() {
			return
		}
		w.fn(r)
	}
}
