package gateway

import "sync"

// A connection gathers its live write batches round-robin over its rooms' queues, in
// its request goroutine; a connection of one room is the case of one.

// minRoomBudget is the fewest items a room may take from its queue per write batch.
const minRoomBudget = 8

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
func (rr *roundRobin) gather(c *conn) (more bool) {
	rr.reread = rr.reread[:0]
	k := 0
	for ; k < rr.rooms && !c.full(); k++ {
		i := (rr.next + k) % rr.rooms
		r := &c.rooms[i]
		taken, charged := 0, 0
		for taken < rr.budget {
			it := r.pending
			if it != nil {
				r.pending = nil
			} else if it, _ = tryRecv(&r.q, r.m); it == nil {
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

// liveBatch is one write batch: its frames, where each ends, its count of events
// and their publish times. A connection borrows one from batchPool only while it
// gathers and writes, so an idle connection holds none.
type liveBatch struct {
	buf  []byte
	ends []int // where each frame of buf ends
	ts   []int64
	n    int
	// clock is the batch's time in Unix milliseconds for events' deadlines, read
	// at the first event that has one (0: not yet).
	clock int64
}

var batchPool = sync.Pool{New: func() any {
	return &liveBatch{buf: make([]byte, 0, 16<<10), ends: make([]int, 0, batchItems), ts: make([]int64, 0, batchItems)}
}}

// getBatch borrows an empty batch.
func getBatch() *liveBatch { return batchPool.Get().(*liveBatch) }

// putBatch returns b to the pool, empty; a buffer grown past its bound is left to
// the garbage collector (see maxPooledBuf), so the pool never keeps the largest
// batch ever written for every connection to borrow.
func putBatch(b *liveBatch) {
	if cap(b.buf) > maxPooledBuf {
		b.buf = make([]byte, 0, 16<<10)
	}
	if cap(b.ts) > 4*batchItems || cap(b.ends) > 4*batchItems {
		b.ts, b.ends = make([]int64, 0, batchItems), make([]int, 0, batchItems)
	}
	b.buf, b.ends, b.ts, b.n, b.clock = b.buf[:0], b.ends[:0], b.ts[:0], 0, 0
	batchPool.Put(b)
}

// settle returns the connection's batch to the pool once its write is over, and
// observes its events' delivery when the write succeeded (err is nil).
func (s *Server) settle(c *conn, err error) {
	if err == nil {
		s.observeDelivered(c.batch.ts)
	}
	putBatch(c.batch)
	c.batch = nil
}
