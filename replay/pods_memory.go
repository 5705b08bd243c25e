package replay

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// memPods is a MemoryLog's liveness records (Pods): one process's, so they matter
// only to tests and to code that runs several pods on one log. TTLs run on the log's
// clock (MemoryConfig.Now).
type memPods struct {
	l *MemoryLog

	mu      sync.Mutex
	records map[string]memPod
}

type memPod struct {
	PodRecord
	expires time.Time
}

var _ Pods = (*memPods)(nil)

// liveLocked returns id's record unless it expired.
func (p *memPods) liveLocked(id string, now time.Time) (memPod, bool) {
	r, ok := p.records[id]
	if !ok {
		return memPod{}, false
	}
	if !now.Before(r.expires) {
		delete(p.records, id)
		return memPod{}, false
	}
	return r, true
}

// ClaimPod implements Pods. It holds up to 10 000 live records: a claim of a new id
// beyond that fails with ErrFull.
func (p *memPods) ClaimPod(ctx context.Context, r PodRecord, ttl time.Duration) (PodRecord, bool, error) {
	if p.l.closed.Load() {
		return PodRecord{}, false, ErrClosed
	}
	r, err := podArgs(r, ttl)
	if err != nil {
		return PodRecord{}, false, fmt.Errorf("replay: claim pod id: %w", err)
	}
	now := p.l.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.liveLocked(r.ID, now)
	switch {
	case ok && cur.Instance != r.Instance:
		return cur.PodRecord, false, fmt.Errorf("replay: claim pod id %q: %w", r.ID, ErrPodInUse)
	case ok:
		cur.Refreshed, cur.expires = now.Truncate(time.Millisecond), now.Add(ttl)
		p.records[r.ID] = cur
		return PodRecord{}, false, nil
	}
	if len(p.records) >= maxMemPods {
		p.pruneLocked(now)
		if len(p.records) >= maxMemPods {
			return PodRecord{}, false, fmt.Errorf("replay: claim pod id %q: %d held: %w", r.ID, len(p.records), ErrFull)
		}
	}
	if p.records == nil {
		p.records = make(map[string]memPod)
	}
	r.Refreshed = now.Truncate(time.Millisecond)
	p.records[r.ID] = memPod{PodRecord: r, expires: now.Add(ttl)}
	return PodRecord{}, true, nil
}

// ReleasePod implements Pods.
func (p *memPods) ReleasePod(ctx context.Context, r PodRecord) error {
	if p.l.closed.Load() {
		return ErrClosed
	}
	if !ValidPodID(r.ID) || !ValidSession(r.Instance) {
		return fmt.Errorf("replay: release pod id %q: %w", r.ID, ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.liveLocked(r.ID, p.l.cfg.Now()); ok && cur.Instance == r.Instance {
		delete(p.records, r.ID)
	}
	return nil
}

// PodHolder implements Pods.
func (p *memPods) PodHolder(ctx context.Context, id string) (PodRecord, bool, error) {
	if p.l.closed.Load() {
		return PodRecord{}, false, ErrClosed
	}
	if !ValidPodID(id) {
		return PodRecord{}, false, fmt.Errorf("replay: pod holder %q: %w", id, ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.liveLocked(id, p.l.cfg.Now())
	return cur.PodRecord, ok, nil
}

// prune drops expired records; the log's sweep calls it.
func (p *memPods) prune(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(now)
}

func (p *memPods) pruneLocked(now time.Time) {
	for id := range p.records {
		p.liveLocked(id, now)
	}
}
