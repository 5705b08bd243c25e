package rooms

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// policyFor gives rooms starting with "ticker." PolicyLatest, "feed." PolicyDropOldest,
// others PolicyClose.
func policyFor(room string) Policy {
	switch {
	case strings.HasPrefix(room, "ticker."):
		return PolicyLatest
	case strings.HasPrefix(room, "feed."):
		return PolicyDropOldest
	}
	return PolicyClose
}

// drainSeqs takes every item waiting in m's queue, releasing their budget, and
// returns their seqs (a resync notice as its position's seq).
func drainSeqs(m *Member) []uint64 {
	var seqs []uint64
	for {
		it, ok := poll(m)
		if !ok {
			return seqs
		}
		m.Release(it)
		seqs = append(seqs, it.Pos.Seq)
	}
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for q := from; q <= to; q++ {
		s = append(s, q)
	}
	return s
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPolicyFullQueue: a member whose queue is full (Queue plus the short first
// queue's firstQueue items) is closed under PolicyClose; under PolicyLatest the
// waiting items make way for the newest alone; under PolicyDropOldest the oldest half
// goes. The member stays open, later events queue behind, and the drops are counted
// by policy.
func TestPolicyFullQueue(t *testing.T) {
	const length = 16
	const full = length + firstQueue // what a member holds before its queue is full
	for _, tc := range []struct {
		room  string
		want  []uint64 // the seqs left after full+3 events
		drops uint64
	}{
		{room: "lobby"},
		{room: "ticker.eur", want: seqRange(full+1, full+3), drops: full},
		{room: "feed.news", want: seqRange(full/2+1, full+3), drops: full / 2},
	} {
		t.Run(tc.room, func(t *testing.T) {
			l, _, g := setup(t, replay.MemoryConfig{History: 1000}, Config{Queue: length, Policy: policyFor})
			m := join(t, g, tc.room)
			if want := policyFor(tc.room); m.Policy() != want {
				t.Fatalf("member's policy %s, want %s", m.Policy(), want)
			}
			publish(t, l, tc.room, full+3)
			st := g.Stats()
			if tc.want == nil {
				if m.Reason() != ReasonSlowConsumer || st.QueueDrops != 1 {
					t.Fatalf("reason %s, queue drops %d: want the member closed as a slow consumer", m.Reason(), st.QueueDrops)
				}
				return
			}
			if m.Reason() != 0 {
				t.Fatalf("member closed (%s) under %s", m.Reason(), m.Policy())
			}
			if got := drainSeqs(m); !equalSeqs(got, tc.want) {
				t.Fatalf("queue holds seqs %v, want %v", got, tc.want)
			}
			if got := st.PolicyDrops[m.Policy()]; got != tc.drops || st.SlowDrops != 0 {
				t.Fatalf("policy drops %d, slow drops %d; want %d and 0", got, st.SlowDrops, tc.drops)
			}
			if m.bytes.Load() != 0 {
				t.Fatalf("queue budget %d after every item was released, want 0", m.bytes.Load())
			}
			// Resumed reading, the member gets every later event again.
			ev := publish(t, l, tc.room, 2)
			expectEvents(t, m, ev.Epoch, full+4, full+5)
		})
	}
}

// TestPolicyQueueBytes: a queue full by its bytes sheds too, dropping as many of the
// oldest as the new item needs, and a single item larger than the whole budget still
// passes alone.
func TestPolicyQueueBytes(t *testing.T) {
	const weight = 40_000 // above QueueBytes/Queue: every item is charged
	l, _, g := setup(t, replay.MemoryConfig{History: 1000}, Config{Queue: 64, QueueBytes: 100_000, Policy: policyFor})
	m := join(t, g, "feed.big")
	// Two fit in 100,000 bytes (twice QueueBytes may wait, see Charge); a
	// third would pass it: dropping the oldest half (one) makes room.
	publishSized(t, l, "feed.big", 3, weight)
	if m.Reason() != 0 {
		t.Fatalf("member closed (%s)", m.Reason())
	}
	if got := drainSeqs(m); !equalSeqs(got, []uint64{2, 3}) {
		t.Fatalf("queue holds seqs %v, want [2 3]", got)
	}
	publishSized(t, l, "feed.big", 2, weight)
	publishSized(t, l, "feed.big", 1, 250_000)
	if got := drainSeqs(m); !equalSeqs(got, []uint64{6}) || m.Reason() != 0 {
		t.Fatalf("queue holds seqs %v (reason %s), want the large item alone: [6]", got, m.Reason())
	}
	if got := g.Stats().PolicyDrops[PolicyDropOldest]; got != 3 {
		t.Fatalf("drops %d, want 3", got)
	}
}

// TestPolicyKeepsFork: a fork notice among the items dropped is kept, before the
// items that stay: only it takes a reader back behind what it was given.
func TestPolicyKeepsFork(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		at   int // where the fork notice waits among the four items
	}{
		{"latest/second", PolicyLatest, 1}, {"latest/third", PolicyLatest, 2},
		{"drop-oldest/second", PolicyDropOldest, 1}, {"drop-oldest/third", PolicyDropOldest, 2},
	} {
		p := tc.p
		t.Run(tc.name, func(t *testing.T) {
			r := &room{name: "r", members: map[*Member]struct{}{}, policy: p}
			m := newMember(r, &Config{Queue: 4, QueueBytes: 1 << 20}, new(atomic.Int64))
			m.open.Add(1)
			ev := func(seq uint64) *Item {
				return newItem(replay.Event{Room: "r", Epoch: "e", Seq: seq, Body: []byte(`{}`)})
			}
			fork := &Item{Pos: replay.Position{Epoch: "e", Seq: 1}, Resync: true, Fork: true}
			r.mu.Lock()
			defer r.mu.Unlock()
			items := []*Item{ev(2), ev(3), ev(4)}
			items = append(items[:tc.at], append([]*Item{fork}, items[tc.at:]...)...)
			for _, it := range items {
				if !m.offerLocked(it) {
					t.Fatalf("queue full at %s", it.Pos)
				}
			}
			if m.offerLocked(ev(12)) {
				t.Fatal("queue took a fifth item; want it full")
			}
			m.shedLocked(ev(5))
			var got []*Item
			for {
				it, ok := poll(m)
				if !ok {
					break
				}
				got = append(got, it)
			}
			if len(got) < 2 || got[0] != fork || got[len(got)-1].Pos.Seq != 5 {
				t.Fatalf("queue after shedding: %d items, first %+v; want the fork notice first and seq 5 last", len(got), got[0])
			}
		})
	}
}

// TestPolicyBudgetSheds: over the pod's budget, a member under a policy that drops
// events is not closed: its queue sheds by its policy, and the scan goes on to close
// others only while the sum stays over the budget.
func TestPolicyBudgetSheds(t *testing.T) {
	l, _, g := setup(t, replay.MemoryConfig{}, Config{
		Queue: 1000, QueueBytes: 1 << 20, MaxQueuedBytes: 10_000, BudgetInterval: time.Hour, Policy: policyFor,
	})
	ticker, feed := join(t, g, "ticker.x"), join(t, g, "feed.x")
	publishSized(t, l, "ticker.x", 12, kilo)
	publishSized(t, l, "feed.x", 8, kilo)
	// 20,000 bytes: the ticker (12,000) keeps its newest item, which brings the sum
	// to 9,000; the feed is left alone.
	if got := g.enforceBudget(); got != 0 {
		t.Fatalf("enforceBudget closed %d members, want none", got)
	}
	if ticker.Reason() != 0 || feed.Reason() != 0 {
		t.Fatalf("closed: ticker %s, feed %s", ticker.Reason(), feed.Reason())
	}
	if got := drainSeqs(ticker); !equalSeqs(got, []uint64{12}) {
		t.Fatalf("ticker's queue holds %v, want [12]", got)
	}
	if got := drainSeqs(feed); len(got) != 8 {
		t.Fatalf("feed's queue holds %v, want all 8", got)
	}
	st := g.Stats()
	if st.PolicyDrops[PolicyLatest] != 11 || st.BudgetDrops != 0 {
		t.Fatalf("Stats = %+v, want 11 latest drops and no budget drop", st)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Policy
		err  bool
	}{
		{in: "close", want: PolicyClose},
		{in: "latest", want: PolicyLatest},
		{in: "drop-oldest", want: PolicyDropOldest},
		{in: "Drop-Oldest", want: PolicyDropOldest},
		{in: "", err: true},
		{in: "drop_oldest", err: true},
		{in: "newest", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePolicy(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("ParsePolicy(%q) = %s, %v; want %s (error %v)", tc.in, got, err, tc.want, tc.err)
			}
			if err == nil && got.String() != strings.ToLower(tc.in) {
				t.Fatalf("%s.String() = %q, want %q", got, got.String(), strings.ToLower(tc.in))
			}
		})
	}
}
