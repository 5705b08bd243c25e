package gateway

import (
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// A connection that follows several rooms (a multiplexed stream, a WebSocket
// connection) gathers its live write batches round-robin over its rooms' queues, in
// one request goroutine. The transports differ only in how an item is framed.

// minRoomBudget is the fewest items a room may take from its queue per write batch.
const minRoomBudget = 8

// liveRoom is one room of a connection that follows several, as its writer sees it:
// the member, its queue and the position the connection has sent of the room.
type liveRoom struct {
	name string
	m    *rooms.Member
	q    <-chan *rooms.Item
	sent replay.Position
}

// batchSink is the connection a roundRobin gathers for: its rooms, and the batch it
// builds in its transport's framing.
type batchSink interface {
	// room returns the connection's i-th room.
	room(i int) *liveRoom
	// full reports whether the batch has reached batchBytes: no further room takes
	// a turn.
	full() bool
	// add appends room i's live item to the batch (or drops it, as stepItem
	// decides), moving the room's sent position on.
	add(i int, it *rooms.Item)
}

// roundRobin is the order in which a connection's batches take from its rooms. A
// batch takes from each room in turn at most the per-room budget,
// max(batchItems/rooms, minRoomBudget), so that a busy room cannot starve the
// others; the next batch starts with the room after the last one served: one room
// further when every room had its turn, else the first room that had none.
type roundRobin struct {
	rooms  int
	budget int
	next   int
	// reread lists the rooms whose turn in the last batch ended at a resync past
	// history the connection can still read (see readable): the caller reads each
	// on from the log, and the queue's copies are then skipped.
	reread []int
}

func newRoundRobin(n int) roundRobin {
	return roundRobin{rooms: n, budget: max(batchItems/n, minRoomBudget)}
}

// gather takes one batch from the rooms' queues into c, each room's items in their
// order, and reports whether the queues may hold more than it took: a room used its
// whole budget, or the batch filled up before every room had its turn. The bytes an
// item charged its member are released once the room's turn is over.
func (rr *roundRobin) gather(c batchSink) (more bool) {
	rr.reread = rr.reread[:0]
	k := 0
	for ; k < rr.rooms && !c.full(); k++ {
		i := (rr.next + k) % rr.rooms
		r := c.room(i)
		taken, charged := 0, 0
		for taken < rr.budget {
			it, ok := tryRecv(&r.q, r.m)
			if !ok {
				break
			}
			taken++
			charged += r.m.Charge(it)
			if readable(it, r.sent) {
				rr.reread = append(rr.reread, i)
				break
			}
			c.add(i, it)
		}
		r.m.ReleaseBytes(charged)
		if taken == rr.budget {
			more = true
		}
	}
	if k < rr.rooms {
		more = true
		rr.next = (rr.next + k) % rr.rooms
	} else {
		rr.next = (rr.next + 1) % rr.rooms
	}
	return more
}

// liveBatch is one live write batch: its frames, its count of events and their
// publish times, in buffers borrowed from the pools only while the batch is
// gathered and written, so an idle connection holds none.
type liveBatch struct {
	bp  *[]byte
	tp  *[]int64
	buf []byte
	ts  []int64
	n   int
}

// borrow starts an empty batch in buffers from the pools.
func (b *liveBatch) borrow() {
	b.bp, b.tp = bufPool.Get().(*[]byte), tsPool.Get().(*[]int64)
	b.buf, b.ts, b.n = (*b.bp)[:0], (*b.tp)[:0], 0
}

// settle returns the batch's buffers to the pools once its write is over, and
// observes its events' delivery when the write succeeded (err is nil).
func (s *Server) settle(b *liveBatch, err error) {
	*b.bp = b.buf[:0]
	putBuf(b.bp)
	if err == nil {
		s.observeDelivered(b.ts)
	}
	putTS(b.tp, b.ts)
	*b = liveBatch{}
}
