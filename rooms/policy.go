package rooms

import (
	"fmt"
	"strings"
)

// Policy is what a member's full queue does with a new item. It is resolved once per
// room, when the room opens (Config.Policy), and its members read the room's: the
// fan-out never looks it up per event.
type Policy uint8

const (
	// PolicyClose closes the member as a slow consumer; it resumes by id. The zero
	// Policy, and the default.
	PolicyClose Policy = iota
	// PolicyLatest keeps only the newest event: the items waiting are dropped and
	// the new one is queued alone.
	PolicyLatest
	// PolicyDropOldest drops the oldest half of the items waiting (more when the
	// queue's bytes need it) and queues the new one.
	PolicyDropOldest

	// NumPolicies bounds the values above, for arrays indexed by Policy.
	NumPolicies
)

// Policies lists every policy that drops events, for metric registration.
var Policies = []Policy{PolicyLatest, PolicyDropOldest}

func (p Policy) String() string {
	switch p {
	case PolicyClose:
		return "close"
	case PolicyLatest:
		return "latest"
	case PolicyDropOldest:
		return "drop-oldest"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy reads a policy's name: close, latest or drop-oldest, in any case.
func ParsePolicy(s string) (Policy, error) {
	for p := PolicyClose; p < NumPolicies; p++ {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("rooms: queue policy %.64q: want close, latest or drop-oldest", s)
}

// Policy is the queue policy of the member's room: the room's, set once when it
// opened (a member keeps no copy, so the fan-out's members stay as small).
func (m *Member) Policy() Policy { return m.room.policy }

// sheds reports whether m's full queue makes room by its policy rather than
// closing: a policy other than PolicyClose, and a queue of two items at least (a
// kept fork notice and the new item).
func (m *Member) sheds() bool { return m.room.policy != PolicyClose && m.length > 1 }

// shedLocked makes room in m's queue by its policy and queues it (nil: only makes
// room, for the pod's budget); the queue holds at least two items (see sheds). It
// takes every item waiting out of the queue, drops the oldest ones (PolicyLatest:
// all of them, or all but the newest for the budget; PolicyDropOldest: the oldest
// half, or more when the bytes need it) and queues the rest again in their order, so
// its cost, spread over the items that fill the queue again, is a few operations
// each. The reader sees no notice for what was dropped: it finds the next event's
// seq past the one it sent and sends a resync before it (see gateway's stepItem);
// a dropped fork notice is kept, since only it can take a reader back. It returns
// the events dropped. The room's lock must be held.
func (m *Member) shedLocked(it *Item) (dropped int) {
	items := m.takeAllLocked()
	keep := len(items) / 2 // drop-oldest
	if m.room.policy == PolicyLatest {
		keep = 0
		if it == nil {
			keep = min(len(items), 1)
		}
	}
	room := m.length // places left for the items kept
	if it != nil {
		room--
	}
	for _, x := range items {
		if x.Fork {
			room-- // kept in front if it is dropped
			break
		}
	}
	keep = max(min(keep, room), 0)
	charge := 0
	if it != nil {
		charge = m.Charge(it)
	}
	// The queue's bytes once the oldest go: the reader's items not yet released,
	// the items kept and the new one.
	kept := m.chargeOf(items[len(items)-keep:])
	base := m.bytes.Load() - int64(m.chargeOf(items))
	for keep > 0 && base+int64(kept+charge) > m.maxBytes {
		kept -= m.Charge(items[len(items)-keep])
		keep--
	}
	old := items[:len(items)-keep]
	var fork *Item // the last fork notice dropped
	for _, x := range old {
		if x.Fork {
			fork = x
		}
		if !x.Resync {
			dropped++
		}
	}
	m.releaseItems(old)
	if fork != nil {
		m.bytes.Add(int64(m.Charge(fork)))
		m.sendLocked(fork)
	}
	for _, x := range items[len(items)-keep:] {
		m.sendLocked(x)
	}
	if it != nil {
		m.bytes.Add(int64(charge))
		m.sendLocked(it)
	}
	m.ring()
	return dropped
}

// takeAllLocked takes every item waiting in m's queues out, oldest first. The reader
// may take some meanwhile: those are before the first taken here. The room's lock
// must be held.
func (m *Member) takeAllLocked() []*Item {
	items := make([]*Item, 0, m.depth()+1)
	qs := [2]chan *Item{m.first}
	if l := m.longer.Load(); l != nil {
		qs[1] = *l
	}
	for _, q := range qs {
	drain:
		for q != nil {
			select {
			case x, ok := <-q:
				if !ok {
					break drain
				}
				items = append(items, x)
			default:
				break drain
			}
		}
	}
	return items
}

// chargeOf is the queue budget items hold together.
func (m *Member) chargeOf(items []*Item) int {
	n := 0
	for _, x := range items {
		n += m.Charge(x)
	}
	return n
}

// releaseItems gives back the queue budget of items taken out of the queue.
func (m *Member) releaseItems(items []*Item) { m.ReleaseBytes(m.chargeOf(items)) }
