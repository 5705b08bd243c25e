package gateway

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
