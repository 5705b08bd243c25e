package replay

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// memStreams is a MemoryLog's records of its pods' open connections
// (FleetStreams): one process's, so they hold one pod in a product and several only
// where tests run several pods on one log. TTLs run on the log's clock.
type memStreams struct {
	l *MemoryLog

	mu      sync.Mutex
	records map[string]PodStreams
}

var _ FleetStreams = (*memStreams)(nil)

// SetStreams implements FleetStreams. It holds up to 10 000 records: a new pod's
// beyond that is ErrFull.
func (m *memStreams) SetStreams(ctx context.Context, pod string, streams int, ttl time.Duration) error {
	if m.l.closed.Load() {
		return ErrClosed
	}
	if !validStreams(pod, streams, ttl) {
		return fmt.Errorf("replay: set streams: %w", ErrInvalid)
	}
	now := m.l.cfg.Now().Truncate(time.Millisecond)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.records[pod]; !ok {
		m.pruneLocked(now)
		if len(m.records) >= maxMemPods {
			return fmt.Errorf("replay: set streams of %q: %d pods held: %w", pod, len(m.records), ErrFull)
		}
		if m.records == nil {
			m.records = make(map[string]PodStreams)
		}
	}
	m.records[pod] = PodStreams{Pod: pod, Streams: streams, UpdatedAt: now, ExpiresAt: now.Add(ttl.Truncate(time.Millisecond))}
	return nil
}

// ForgetStreams implements FleetStreams.
func (m *memStreams) ForgetStreams(ctx context.Context, pod string) error {
	if m.l.closed.Load() {
		return ErrClosed
	}
	if !ValidPodID(pod) {
		return fmt.Errorf("replay: forget streams of %q: %w", pod, ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, pod)
	return nil
}

// Streams implements FleetStreams.
func (m *memStreams) Streams(ctx context.Context) ([]PodStreams, error) {
	if m.l.closed.Load() {
		return nil, ErrClosed
	}
	now := m.l.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(now)
	out := make([]PodStreams, 0, min(len(m.records), MaxFleetPods))
	for _, r := range m.records {
		if len(out) == MaxFleetPods {
			break
		}
		out = append(out, r)
	}
	return out, nil
}

// prune drops expired records; the log's sweep calls it.
func (m *memStreams) prune(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(now)
}

func (m *memStreams) pruneLocked(now time.Time) {
	for pod, r := range m.records {
		if !now.Before(r.ExpiresAt) {
			delete(m.records, pod)
		}
	}
}
