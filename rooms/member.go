package rooms

import (
	"sync"
	"sync/atomic"

	"github.com/roomcast/roomcast/replay"
)

// Item is one entry of a member's queue: an event, shared by every member that
// receives it and by the room's latest events (Registry.Since), or a resync notice.
// Each transport's encoding of the event is made once, by the first reader that asks
// for it, and shared by every other (Encoded).
type Item struct {
	// Pos is the event's position or, for a resync, the position the stream continues
	// after.
	Pos replay.Position
	// Event is the event; the zero Event for a resync notice. Read-only: it is shared.
	Event replay.Event
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

	enc [MaxFramings]encoding // by Framing.Slot
}

// encoding is an item's event in one framing, made once.
type encoding struct {
	once sync.Once
	b    []byte
}

// newItem is the item of ev.
func newItem(ev replay.Event) *Item { return &Item{Pos: ev.Position(), Event: ev} }

// TS is the event's publish time in Unix milliseconds (the envelope's ts), or 0 for
// a resync notice.
func (it *Item) TS() int64 { return it.Event.TS }

// itemFields is what an event's encoding adds to its body and its names (room,
// epoch, type), at most: the envelope's field names, seq, ts, and a transport's
// framing around them.
const itemFields = 128

// size is the bytes one encoding of the item takes, at most, and what it weighs in a
// queue (see Member.Charge).
func (it *Item) size() int {
	ev := &it.Event
	return len(ev.Body) + len(ev.Room) + 2*len(ev.Epoch) + 2*len(ev.Type) + itemFields
}

// MaxFramings is how many framings an item keeps an encoding of.
const MaxFramings = 2

// Framing is one transport's encoding of an event: an SSE frame's fields, a WebSocket
// event frame. Slot, below MaxFramings, names where items keep it; framings used
// together must have distinct slots.
type Framing struct {
	Slot   int
	Encode func(replay.Event) []byte
}

// Encoded returns the item's event in framing f, encoding it on the first call of
// any reader: fan-out to a thousand members encodes once. A resync notice has no
// event: a reader frames it itself. A call that comes while the first encodes waits
// for it. Read-only: it is shared.
func (it *Item) Encoded(f *Framing) []byte {
	e := &it.enc[f.Slot]
	e.once.Do(func() { e.b = f.Encode(it.Event) })
	return e.b
}

// Member is one stream's place in a room.
type Member struct {
	room     *room
	first    chan *Item                 // the queue a member starts with; see Queue
	longer   atomic.Pointer[chan *Item] // the queue that replaced first, once it filled up
	length   int                        // Config.Queue: the queue's full length
	bytes    atomic.Int64               // bytes of the large items waiting (see Charge)
	maxBytes int64
	small    int // items up to this size are not charged (QueueBytes / Queue)

	start replay.Position // the room's delivered position when the member was added

	// done is made by the first Done: a reader woken by a bell or a waker never
	// asks for it, and an idle member then holds no channel it does not use.
	doneMu sync.Mutex
	done   chan struct{}
	once   sync.Once
	reason atomic.Int32
	open   *atomic.Int64 // the registry's count of open members

	bell  atomic.Pointer[chan struct{}] // rung on every queued item and on close; nil: none (see JoinBell)
	waker atomic.Value                  // a Waker woken likewise, once set (SetWaker)
}

// Room is the room's name.
func (m *Member) Room() string { return m.room.name }

// Start is the room's position when the member joined: every event after it
// reaches the member, through its queue, in order (a resync may stand for some).
func (m *Member) Start() replay.Position { return m.start }

// firstQueue is the length a member's queue starts with. Most streams are idle most
// of the time, and a queue's channel holds its whole length from the start, so a
// member's queue starts this short and is replaced by one of the configured length
// the first time it fills up.
const firstQueue = 8

// newMember is a member of r with a queue of firstQueue items (or length, if shorter).
func newMember(r *room, cfg *Config, open *atomic.Int64) *Member {
	return &Member{room: r, first: make(chan *Item, min(firstQueue, cfg.Queue)), length: cfg.Queue,
		maxBytes: cfg.QueueBytes, small: int(cfg.QueueBytes / int64(cfg.Queue)),
		open: open}
}

// Queue is where the reader takes the member's items, in order. After taking items
// the reader must give their budget back with Release or ReleaseBytes.
//
// A member's queue starts short. The first time it fills up it is replaced, once, by
// one of the configured length, and the short one is closed after its last item. A
// receive that finds the queue closed thus means that every item before the new
// queue's has been taken, and that the reader calls Queue again. A member holds at
// most Queue + firstQueue items.
func (m *Member) Queue() <-chan *Item {
	// Once longer is set, first takes no more items: empty, it is done with.
	if l := m.longer.Load(); l != nil && len(m.first) == 0 {
		return *l
	}
	return m.first
}

// current is the queue items go to. The room's lock must be held.
func (m *Member) current() chan *Item {
	if l := m.longer.Load(); l != nil {
		return *l
	}
	return m.first
}

// Release gives back the queue budget held by an item taken from Queue.
func (m *Member) Release(it *Item) { m.ReleaseBytes(m.Charge(it)) }

// Charge is the queue budget an item holds: its size (an encoding's, at most) when
// that is above the queue's average share (QueueBytes / Queue), else nothing, since
// the queue's length bounds those. The items waiting in a queue thus take at most
// twice QueueBytes (plus the short first queue's small ones, see Queue).
func (m *Member) Charge(it *Item) int {
	if n := it.size(); n > m.small {
		return n
	}
	return 0
}

// ReleaseBytes gives back n bytes of queue budget at once: the Charge of a batch of
// items taken from Queue, so that a reader pays one atomic add per batch.
func (m *Member) ReleaseBytes(n int) {
	if n != 0 {
		m.bytes.Add(-int64(n))
	}
}

// queuedLocked estimates the bytes waiting in the queue for the pod's budget: the
// large items exactly, plus the room's average small item for every item (small
// items are not counted one by one, which keeps the fan-out path free of writes to
// the member). The room's lock must be held.
func (m *Member) queuedLocked() int64 {
	return m.bytes.Load() + int64(m.depth())*m.room.smallAvg
}

// depth is the number of items waiting in the member's queue.
func (m *Member) depth() int {
	n := len(m.first)
	if l := m.longer.Load(); l != nil {
		n += len(*l)
	}
	return n
}

// queued is queuedLocked for callers without the lock.
func (m *Member) queued() int64 {
	m.room.mu.Lock()
	defer m.room.mu.Unlock()
	return m.queuedLocked()
}

// Done is closed when the member is closed: read Reason to learn why.
func (m *Member) Done() <-chan struct{} {
	m.doneMu.Lock()
	defer m.doneMu.Unlock()
	if m.done == nil {
		m.done = make(chan struct{})
		if m.reason.Load() != 0 {
			close(m.done)
		}
	}
	return m.done
}

// Reason is why the member was closed, or 0 while it is open.
func (m *Member) Reason() Reason { return Reason(m.reason.Load()) }

// Close closes the member with reason; only the first reason counts. It does not
// remove the member from its room: the stream does that with Registry.Leave.
func (m *Member) Close(r Reason) bool {
	closed := false
	m.once.Do(func() {
		m.doneMu.Lock()
		// A Done made before this closes here; one made after finds the reason
		// set and is made closed.
		m.reason.Store(int32(r))
		if m.done != nil {
			close(m.done)
		}
		m.doneMu.Unlock()
		m.open.Add(-1)
		closed = true
	})
	if closed {
		m.ring()
	}
	return closed
}

// offerLocked queues it without blocking; it reports false when the queue is full
// by count or by bytes. The room's lock must be held.
func (m *Member) offerLocked(it *Item) bool {
	n := int64(m.Charge(it))
	if n == 0 {
		// Small items are bounded by the queue's length alone: Queue of them fit
		// in QueueBytes. This spares the shared counter (and its cache line, which
		// the reader writes too) on the fan-out path.
		if !m.sendLocked(it) {
			return false
		}
		m.ring()
		return true
	}
	// A single item larger than the budget still passes into an empty queue.
	if total := m.bytes.Add(n); total > m.maxBytes && total != n {
		m.bytes.Add(-n)
		return false
	}
	if !m.sendLocked(it) {
		m.bytes.Add(-n)
		return false
	}
	m.ring()
	return true
}

// sendLocked puts it on the queue without blocking, replacing a full short queue by
// one of the full length (see Queue); it reports false when the queue is full at its
// full length. The room's lock must be held: it orders every send and replacement.
func (m *Member) sendLocked(it *Item) bool {
	q := m.current()
	select {
	case q <- it:
		return true
	default:
	}
	if cap(q) >= m.length {
		return false
	}
	longer := make(chan *Item, m.length)
	longer <- it
	// Set longer before closing first: a reader that finds first closed then gets
	// longer from Queue.
	m.longer.Store(&longer)
	close(q)
	return true
}
