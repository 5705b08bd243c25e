package rooms

import (
	"sync"
	"sync/atomic"

	"github.com/roomcast/roomcast/replay"
)

// Item is one entry of a member's queue: an event's SSE frame, shared by every member
// that receives it, or a resync notice.
type Item struct {
	// Pos is the event's position or, for a resync, the position the stream continues
	// after.
	Pos replay.Position
	// Frame is the encoded SSE frame. Read-only: it is shared.
	Frame []byte
	// Resync marks a notice that the history between the member's last event and Pos
	// is lost.
	Resync bool
	// Fork marks a resync because the log holds another event at a position members
	// were already given: the history forked, and a reader must take the resync even
	// when it is at or behind what it has delivered.
	Fork bool
	// After is, for a resync, the room's delivered position the lost history comes
	// after. A reader that got further on its own (from the log, on resume) may still
	// read what follows.
	After replay.Position

	ts int64 // the event's publish time
}

// Member is one stream's place in a room.
//
// Queue budget: the fan-out counts the bytes it queues in enq, a plain field written
// only under the room's lock; the reader counts the bytes it takes in released, once
// per batch. Their difference is what the queue holds. The two counters sit on
// separate cache lines, so the fan-out never writes a line the reader writes.
type Member struct {
	room     *room
	queue    chan *Item
	maxBytes int64
	enq      int64 // bytes ever queued; under room.mu

	start replay.Position // the room's delivered position when the member was added

	done   chan struct{}
	once   sync.Once
	reason atomic.Int32
	open   *atomic.Int64 // the registry's count of open members

	_        [64]byte
	released atomic.Int64 // bytes ever taken by the reader
	_        [56]byte
}

// Room is the room's name.
func (m *Member) Room() string { return m.room.name }

// Start is the room's position when the member joined: every event after it
// reaches the member, through its queue, in order (a resync may stand for some).
func (m *Member) Start() replay.Position { return m.start }

// Queue delivers the member's items in order. After taking items the reader must
// give their budget back with Release or ReleaseBytes.
func (m *Member) Queue() <-chan *Item { return m.queue }

// Release gives back the queue budget held by an item taken from Queue.
func (m *Member) Release(it *Item) { m.ReleaseBytes(m.Charge(it)) }

// Charge is the queue budget an item holds: its frame's size.
func (m *Member) Charge(it *Item) int { return len(it.Frame) }

// ReleaseBytes gives back n bytes of queue budget at once: the Charge of a batch of
// items taken from Queue, so that a reader pays one atomic add per batch.
func (m *Member) ReleaseBytes(n int) {
	if n != 0 {
		m.released.Add(int64(n))
	}
}

// queuedLocked is the bytes waiting in the queue (taken but not yet released
// counts as waiting). The room's lock must be held.
func (m *Member) queuedLocked() int64 { return m.enq - m.released.Load() }

// queued is queuedLocked for callers without the lock.
func (m *Member) queued() int64 {
	m.room.mu.Lock()
	defer m.room.mu.Unlock()
	return m.queuedLocked()
}

// Done is closed when the member is closed: read Reason to learn why.
func (m *Member) Done() <-chan struct{} { return m.done }

// Reason is why the member was closed, or 0 while it is open.
func (m *Member) Reason() Reason { return Reason(m.reason.Load()) }

// Close closes the member with reason; only the first reason counts. It does not
// remove the member from its room: the stream does that with Registry.Leave.
func (m *Member) Close(r Reason) bool {
	closed := false
	m.once.Do(func() {
		m.reason.Store(int32(r))
		close(m.done)
		m.open.Add(-1)
		closed = true
	})
	return closed
}

// offerLocked queues it without blocking; it reports false when the queue is full
// by count or by bytes. The room's lock must be held.
func (m *Member) offerLocked(it *Item) bool {
	n := int64(len(it.Frame))
	// A single frame larger than the budget still passes into an empty queue.
	if q := m.queuedLocked(); q != 0 && q+n > m.maxBytes {
		return false
	}
	select {
	case m.queue <- it:
		m.enq += n
		return true
	default:
		return false
	}
}
