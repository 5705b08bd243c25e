package rooms

import (
	"context"
	"fmt"
	"time"
)

// Stats is a snapshot of the registry's counters.
type Stats struct {
	Members       int64  // open streams
	Rooms         int64  // rooms with members or lingering
	Subscriptions int64  // bus subscriptions held
	SlowDrops     uint64 // members closed because their queue overflowed or the pod's budget did
	BudgetDrops   uint64 // of those, members closed by the pod's budget (MaxQueuedBytes)
	QueueDrops    uint64 // of those, members closed because their own queue overflowed
	QueuedBytes   int64  // bytes waiting in all queues at the last budget scan (0 with no budget)
	Repairs       uint64 // repairs started by a doorbell that could not be delivered as it came (a gap, a new epoch, a zero ring)
	GapsRepaired  uint64 // of those, repairs that filled a gap from the log (delivered events from it, without a resync)
	Resyncs       uint64 // gaps the log could not fill
	Forks         uint64 // repairs that found the history changed under members: a new epoch, or another event at the last delivered seq
	RecentHits    uint64 // resume reads served from the rooms' latest events
	RecentMisses  uint64 // resume reads that went to the log, shared reads counted per reader
	HistoryReads  uint64 // log reads made for resumes: window fills and shared reads, each once
	RecentBytes   int64  // bytes the rooms' latest events take (see Config.MaxRecentBytes)
	// PolicyDrops counts, by Policy, the events dropped from full queues by their
	// rooms' policies (full by count or bytes, or chosen by the pod's budget).
	PolicyDrops [NumPolicies]uint64
}

// Stats returns the registry's counters.
func (g *Registry) Stats() Stats {
	st := Stats{
		Members:       g.members.Load(),
		Rooms:         g.rooms.Load(),
		Subscriptions: g.subscriptions.Load(),
		BudgetDrops:   g.budgetDrops.Load(),
		QueueDrops:    g.slowDrops.Load(),
		QueuedBytes:   g.queuedBytes.Load(),
		Repairs:       g.repairs.Load(),
		GapsRepaired:  g.gapsRepaired.Load(),
		Resyncs:       g.resyncs.Load(),
		Forks:         g.forks.Load(),
		RecentHits:    g.recentHits.Load(),
		RecentMisses:  g.recentMisses.Load(),
		HistoryReads:  g.historyReads.Load(),
		RecentBytes:   g.recentBytes.Load(),
	}
	st.SlowDrops = st.QueueDrops + st.BudgetDrops
	for p := range st.PolicyDrops {
		st.PolicyDrops[p] = g.policyDrops[p].Load()
	}
	return st
}

// Len reports the open members: streams not yet closed.
func (g *Registry) Len() int { return int(g.open.Load()) }

// Shed closes up to n open members with ReasonShed, so their streams end with a
// reconnect hint. It reports how many it closed.
func (g *Registry) Shed(n int) int {
	closed := 0
	g.eachMember(func(m *Member) bool {
		if closed >= n {
			return false
		}
		if m.Close(ReasonShed) {
			closed++
		}
		return true
	})
	return closed
}

// CloseAll closes every member with ReasonShed and waits until their streams have
// left, or ctx ends.
func (g *Registry) CloseAll(ctx context.Context) error {
	g.eachMember(func(m *Member) bool { m.Close(ReasonShed); return true })
	return g.awaitEmpty(ctx)
}

func (g *Registry) awaitEmpty(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for g.members.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("rooms: %d streams still open: %w", g.members.Load(), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// eachMember calls fn for members, room by room, until fn returns false. It snapshots
// each room's members under its lock and calls fn outside it.
func (g *Registry) eachMember(fn func(*Member) bool) {
	var batch []*Member
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		rs := make([]*room, 0, len(s.rooms))
		for _, r := range s.rooms {
			rs = append(rs, r)
		}
		s.mu.Unlock()
		for _, r := range rs {
			batch = batch[:0]
			r.mu.Lock()
			for m := range r.members {
				batch = append(batch, m)
			}
			r.mu.Unlock()
			for _, m := range batch {
				if !fn(m) {
					return
				}
			}
		}
	}
}

// Close closes every member with ReasonShutdown, releases every bus subscription and
// waits for the registry's goroutines. Join fails with ErrClosed afterwards.
func (g *Registry) Close(ctx context.Context) error {
	if g.closed.Swap(true) {
		return nil
	}
	close(g.stop)
	var subscribed []string
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		for name, r := range s.rooms {
			r.mu.Lock()
			r.gone = true
			r.stopLingerLocked(g)
			r.recent.dropLocked(g)
			for m := range r.members {
				m.Close(ReasonShutdown)
			}
			if isClosed(r.ready) && r.err == nil {
				subscribed = append(subscribed, name)
			}
			r.mu.Unlock()
		}
		s.mu.Unlock()
	}
	for _, name := range subscribed {
		g.unsubscribe(name)
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rooms: close: %w", ctx.Err())
	}
}
