package rooms

import (
	"container/heap"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/roomcast/roomcast/replay"
)

// Occupancy: who is in which room on this pod, for operators.

// RoomMembers is a room and the members it has on this pod.
type RoomMembers struct {
	Room    string
	Members int
}

// Subscription is a room's bus subscription on this pod.
type Subscription int

const (
	SubscriptionNone        Subscription = iota + 1 // not held: no member, linger over
	SubscriptionSubscribing                         // the first join is subscribing
	SubscriptionSubscribed                          // held
)

func (s Subscription) String() string {
	switch s {
	case SubscriptionSubscribing:
		return "subscribing"
	case SubscriptionSubscribed:
		return "subscribed"
	}
	return "none"
}

// QueueDepth summarises the events waiting in the queues of a room's open members:
// nearest-rank percentiles over a sample of at most MaxDepthSample members.
type QueueDepth struct {
	P50, P90, P99, Max int
	Sampled            int // members sampled
}

// MaxDepthSample bounds the members whose queues RoomInfo reads.
const MaxDepthSample = 1024

// RoomInfo is what this pod knows of one room.
type RoomInfo struct {
	Members      int // members on this pod, including those whose stream is closing
	Subscription Subscription
	// Head is the last position delivered to the room's members (zero when the room
	// is not held, or has no history yet).
	Head       replay.Position
	QueueDepth QueueDepth
}

// Room reports what this pod knows of room; zeros and SubscriptionNone for a room
// it does not hold. It reads at most MaxDepthSample members' queues.
func (g *Registry) Room(name string) RoomInfo {
	s := g.shard(name)
	s.mu.Lock()
	r := s.rooms[name]
	s.mu.Unlock()
	info := RoomInfo{Subscription: SubscriptionNone}
	if r == nil {
		return info
	}
	var depths [MaxDepthSample]int32
	n := 0
	r.mu.Lock()
	if r.gone {
		r.mu.Unlock()
		return info
	}
	info.Members = len(r.members)
	info.Head = r.pos
	switch {
	case !isClosed(r.ready):
		info.Subscription = SubscriptionSubscribing
	case r.err == nil:
		info.Subscription = SubscriptionSubscribed
	}
	for m := range r.members {
		if n == len(depths) {
			break
		}
		if m.reason.Load() == 0 {
			depths[n] = int32(m.depth())
			n++
		}
	}
	r.mu.Unlock()
	info.QueueDepth = depthOf(depths[:n])
	return info
}

// depthOf sorts d and reads its percentiles.
func depthOf(d []int32) QueueDepth {
	if len(d) == 0 {
		return QueueDepth{}
	}
	slices.Sort(d)
	rank := func(p int) int { // nearest rank: the smallest value with p% at or below it
		i := (p*len(d)+99)/100 - 1
		return int(d[max(i, 0)])
	}
	return QueueDepth{P50: rank(50), P90: rank(90), P99: rank(99), Max: int(d[len(d)-1]), Sampled: len(d)}
}

// TopRooms returns up to limit of the rooms with members on this pod whose names
// start with prefix, most members first, then by name, and how many such rooms
// there are. It reads every room's member count once, holding at most limit of
// them.
func (g *Registry) TopRooms(prefix string, limit int) ([]RoomMembers, int) {
	limit = max(limit, 0)
	top := make(roomHeap, 0, min(limit, 1024))
	total := 0
	g.eachRoom(func(r *room) {
		if !strings.HasPrefix(r.name, prefix) {
			return
		}
		r.mu.Lock()
		n := len(r.members)
		gone := r.gone
		r.mu.Unlock()
		if n == 0 || gone {
			return
		}
		total++
		e := RoomMembers{Room: r.name, Members: n}
		switch {
		case len(top) < limit:
			heap.Push(&top, e)
		case limit > 0 && before(e, top[0]):
			top[0] = e
			heap.Fix(&top, 0)
		}
	})
	out := []RoomMembers(top)
	slices.SortFunc(out, func(a, b RoomMembers) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	return out, total
}

// before orders rooms as TopRooms lists them.
func before(a, b RoomMembers) bool {
	if a.Members != b.Members {
		return a.Members > b.Members
	}
	return a.Room < b.Room
}

// roomHeap keeps the last-listed room on top, so a better one replaces it.
type roomHeap []RoomMembers

func (h roomHeap) Len() int           { return len(h) }
func (h roomHeap) Less(i, j int) bool { return before(h[j], h[i]) }
func (h roomHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *roomHeap) Push(x any)        { *h = append(*h, x.(RoomMembers)) }
func (h *roomHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// appendCounts appends every room with members on this pod to buf.
func (g *Registry) appendCounts(buf []RoomMembers) []RoomMembers {
	g.eachRoom(func(r *room) {
		r.mu.Lock()
		n := len(r.members)
		gone := r.gone
		r.mu.Unlock()
		if n > 0 && !gone {
			buf = append(buf, RoomMembers{Room: r.name, Members: n})
		}
	})
	return buf
}

// roomMembers reports room's members on this pod.
func (g *Registry) roomMembers(name string) int {
	s := g.shard(name)
	s.mu.Lock()
	r := s.rooms[name]
	s.mu.Unlock()
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return 0
	}
	return len(r.members)
}

// emptyNotes collects the rooms whose last member left, for a Reporter, so that it
// forgets them at once instead of at its next pass.
type emptyNotes struct {
	on    atomic.Bool // a Reporter listens
	mu    sync.Mutex
	rooms map[string]struct{}
	wake  chan struct{} // buffered 1
}

// maxEmptyNotes bounds the rooms noted between two reads.
const maxEmptyNotes = 10000

// emptied notes that room lost its last member. Called under the room's lock: it
// never blocks; its lock is a leaf.
func (e *emptyNotes) emptied(room string) {
	if !e.on.Load() {
		return
	}
	e.mu.Lock()
	if len(e.rooms) < maxEmptyNotes { // else the reporter's next pass finds it
		e.rooms[room] = struct{}{}
	}
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// take returns the rooms noted since the last take.
func (e *emptyNotes) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.rooms))
	for r := range e.rooms {
		out = append(out, r)
		delete(e.rooms, r)
	}
	return out
}
