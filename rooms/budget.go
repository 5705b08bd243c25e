package rooms

import (
	"cmp"
	"slices"
)

type queuedMember struct {
	m     *Member
	bytes int64
}

// enforceBudget sums the bytes waiting in open members' queues and, while the sum is
// over MaxQueuedBytes, closes the member with the most waiting as a slow consumer: it
// is the furthest behind, and resumes by id. A member whose room has a queue policy
// that drops events is not closed: its queue sheds by that policy instead (the
// newest item stays, or the newest half). It reports how many it closed.
func (g *Registry) enforceBudget() int {
	total := g.queuedTotal(nil)
	closed, shed := 0, 0
	if g.cfg.MaxQueuedBytes > 0 && total > g.cfg.MaxQueuedBytes {
		// Over budget (rare): a second pass collects who holds what.
		var ms []queuedMember
		total = g.queuedTotal(func(m *Member, q int64) { ms = append(ms, queuedMember{m, q}) })
		slices.SortFunc(ms, func(a, b queuedMember) int { return cmp.Compare(b.bytes, a.bytes) })
		for _, q := range ms {
			if total <= g.cfg.MaxQueuedBytes {
				break
			}
			if q.m.sheds() {
				total -= g.shed(q.m)
				shed++
				continue
			}
			if q.m.Close(ReasonSlowConsumer) {
				g.budgetDrops.Add(1)
				closed++
			}
			total -= q.bytes
		}
		if shed > 0 {
			g.cfg.Logger.Warn("queued bytes over the pod's budget: dropped the oldest events of the queues furthest behind, by their rooms' policies",
				"queues", shed, "max_queued_bytes", g.cfg.MaxQueuedBytes)
		}
		if closed > 0 {
			g.cfg.Logger.Warn("queued bytes over the pod's budget: closed the streams furthest behind",
				"closed", closed, "max_queued_bytes", g.cfg.MaxQueuedBytes)
		}
	}
	g.queuedBytes.Store(total)
	return closed
}

// shed drops the oldest events of m's queue by its policy, and returns the bytes
// that freed.
func (g *Registry) shed(m *Member) int64 {
	m.room.mu.Lock()
	defer m.room.mu.Unlock()
	if m.reason.Load() != 0 {
		return 0
	}
	before := m.queuedLocked()
	g.policyDrops[m.room.policy].Add(uint64(m.shedLocked(nil)))
	return before - m.queuedLocked()
}

// queuedTotal sums the bytes queued to open members, calling each (when not nil) for
// every member that has some.
func (g *Registry) queuedTotal(each func(*Member, int64)) int64 {
	var total int64
	g.eachRoom(func(r *room) {
		r.mu.Lock()
		for m := range r.members {
			if m.reason.Load() != 0 {
				continue
			}
			if q := m.queuedLocked(); q > 0 {
				total += q
				if each != nil {
					each(m, q)
				}
			}
		}
		r.mu.Unlock()
	})
	return total
}

// eachRoom calls fn for every room, outside the shard locks.
func (g *Registry) eachRoom(fn func(*room)) {
	var rs []*room
	for i := range g.shards {
		s := &g.shards[i]
		rs = rs[:0]
		s.mu.Lock()
		for _, r := range s.rooms {
			rs = append(rs, r)
		}
		s.mu.Unlock()
		for _, r := range rs {
			fn(r)
		}
	}
}
