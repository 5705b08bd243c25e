package replay

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// memOwners is a MemoryLog's client ownership registry (Owners): one pod's. TTLs
// run on the log's clock (MemoryConfig.Now).
type memOwners struct {
	l *MemoryLog

	mu      sync.Mutex
	entries map[string]memOwner
	pruned  time.Time // when expired entries were last pruned because of the bound
}

type memOwner struct {
	Owner
	expires time.Time
	acks    map[string]Ack // the last ack per room (receipts_memory.go); nil: none
}

var _ Owners = (*memOwners)(nil)

// liveLocked returns client's entry unless it expired.
func (o *memOwners) liveLocked(client string, now time.Time) (memOwner, bool) {
	e, ok := o.entries[client]
	if !ok {
		return memOwner{}, false
	}
	if !now.Before(e.expires) {
		delete(o.entries, client)
		return memOwner{}, false
	}
	return e, true
}

// ClaimClient implements Owners. It holds up to 100 000 live entries: a claim for a
// new client beyond that fails with ErrFull.
func (m *memOwners) ClaimClient(ctx context.Context, o Owner, ttl time.Duration) (Owner, error) {
	if m.l.closed.Load() {
		return Owner{}, ErrClosed
	}
	o, err := ownerArgs(o, ttl)
	if err != nil {
		return Owner{}, fmt.Errorf("replay: claim client: %w", err)
	}
	now := m.l.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.liveLocked(o.Client, now)
	switch {
	case ok && cur.Identity != "" && cur.Identity != o.Identity:
		return cur.Owner, fmt.Errorf("replay: claim client %q: %w", o.Client, ErrOtherIdentity)
	case ok && CompareBoots(cur.Boot, o.Boot) > 0:
		return cur.Owner, fmt.Errorf("replay: claim client %q: %w", o.Client, ErrSuperseded)
	}
	if err := m.putLocked(o, ttl, now, ok); err != nil {
		return Owner{}, fmt.Errorf("replay: claim client %q: %w", o.Client, err)
	}
	return cur.Owner, nil
}

// putLocked writes o's entry, claimed now for ttl; held reports whether the client
// has a live entry already (which the bound does not count twice).
func (m *memOwners) putLocked(o Owner, ttl time.Duration, now time.Time, held bool) error {
	if m.entries == nil {
		m.entries = make(map[string]memOwner)
	}
	if !held && len(m.entries) >= maxOwners && now.Sub(m.pruned) >= time.Second {
		// Pruning walks every entry: at most once a second, and only when full.
		for c := range m.entries {
			m.liveLocked(c, now)
		}
		m.pruned = now
	}
	if !held && len(m.entries) >= maxOwners {
		return fmt.Errorf("%d clients held: %w", len(m.entries), ErrFull)
	}
	o.Since = time.UnixMilli(now.UnixMilli())
	m.entries[o.Client] = memOwner{Owner: o, expires: now.Add(ttl)}
	return nil
}

// RefreshClient implements Owners.
func (m *memOwners) RefreshClient(ctx context.Context, o Owner, ttl time.Duration) (bool, error) {
	if m.l.closed.Load() {
		return false, ErrClosed
	}
	o, err := ownerArgs(o, ttl)
	if err != nil {
		return false, fmt.Errorf("replay: refresh client: %w", err)
	}
	now := m.l.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.liveLocked(o.Client, now)
	switch {
	case !ok:
		if err := m.putLocked(o, ttl, now, false); err != nil {
			return false, fmt.Errorf("replay: refresh client %q: %w", o.Client, err)
		}
		return true, nil
	case cur.Session != o.Session:
		return false, fmt.Errorf("replay: refresh client %q: %w", o.Client, ErrNotOwner)
	}
	cur.expires = now.Add(ttl)
	m.entries[o.Client] = cur
	return false, nil
}

// ReleaseClient implements Owners.
func (o *memOwners) ReleaseClient(ctx context.Context, client, session string) error {
	if o.l.closed.Load() {
		return ErrClosed
	}
	if !ValidClient(client) || !ValidSession(session) {
		return fmt.Errorf("replay: release client %q: %w", client, ErrInvalid)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.liveLocked(client, o.l.cfg.Now()); ok && cur.Session == session {
		delete(o.entries, client)
	}
	return nil
}

// ClientOwner implements Owners.
func (o *memOwners) ClientOwner(ctx context.Context, client string) (Owner, bool, error) {
	if o.l.closed.Load() {
		return Owner{}, false, ErrClosed
	}
	if !ValidClient(client) {
		return Owner{}, false, fmt.Errorf("replay: client owner %q: %w", client, ErrInvalid)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.liveLocked(client, o.l.cfg.Now())
	return cur.Owner, ok, nil
}

// prune forgets expired entries; the sweeper calls it.
func (o *memOwners) prune(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for c := range o.entries {
		o.liveLocked(c, now)
	}
}
