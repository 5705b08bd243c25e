package gateway

import (
	"context"
	"strings"
	"time"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// The delivery core. Every transport (a single-room SSE stream, a multiplexed SSE
// stream, a WebSocket connection) is a conn: the rooms it follows, what it has sent of
// each, and one writer, its request goroutine. The core owns what they share: joining
// and registering (connected), the history-to-live handoff, replay batching, the
// no-hole, no-duplicate, resync and fork rules (stepItem), the round-robin across rooms
// (roundRobin), heartbeats, write batches and end reasons. A transport supplies only
// how those look on its wire (transport).

// transport is what a connection's wire looks like: its framing of events and
// notices, its opening and last words, its writes and its heartbeat.
type transport interface {
	// open writes the connection's first words once it has joined its rooms, with
	// every room's starting position set (conn.rooms[i].sent): an anchor, a welcome.
	open(c *conn, resumed []bool) error
	// appendEvent appends room i's event; the room's sent position is it.Pos already.
	appendEvent(dst []byte, c *conn, i int, it *rooms.Item) []byte
	// appendResync appends the notice that room i's history continues after head
	// (fork: the log forked under what the connection was given); the room's sent
	// position is head already.
	appendResync(dst []byte, c *conn, i int, head replay.Position, fork bool) []byte
	// appendExpired appends room i's expired marker in place of the event at pos,
	// whose deadline has passed; the room's sent position is pos already.
	appendExpired(dst []byte, c *conn, i int, pos replay.Position) []byte
	// record runs before every write of events: the rooms' sent positions have moved
	// and each room's batched counts the events of the write (a client may
	// acknowledge an event before the write returns).
	record(c *conn)
	// write sends one batch: buf holds whole frames, the i-th ending at ends[i].
	write(c *conn, buf []byte, ends []int) error
	// interval is how often tick runs.
	interval() time.Duration
	// tick keeps a live connection alive (a heartbeat, a ping); a non-zero reason
	// ends it.
	tick(c *conn, now time.Time) rooms.Reason
	// end writes the connection's last words for reason (reasonKicked: a kick's).
	end(c *conn, reason rooms.Reason)
}

// reasonKicked ends a connection that its transport closed on its own terms (a
// WebSocket kick, a failed owner's refresh): the members leave as their client's, and
// the transport says why.
const reasonKicked rooms.Reason = 1 << 10

// connKind is a connection's transport, as the pod's stats count them.
type connKind uint8

const (
	kindStream connKind = iota // one room, GET /rooms/{room}/events
	kindMux                    // several rooms, GET /events
	kindWS                     // GET /ws
	numKinds
)

// conn is one connection's delivery state, owned by its request goroutine.
type conn struct {
	s     *Server
	t     transport
	kind  connKind
	ctx   context.Context
	rooms []connRoom
	// bell is rung by every member of a connection of several rooms; a connection of
	// one room waits on its member's queue instead, one channel fewer.
	bell chan struct{}
	// token is a multiplexed stream's resume token prefix (replay.AppendTokenHead):
	// with it set, every room keeps its part of the token in connRoom.tok.
	token []byte

	rr    roundRobin
	batch *liveBatch // the batch being gathered and written; nil between batches

	// A transport that serves more than its rooms (WebSocket) sets these; a nil
	// channel never fires.
	out     <-chan []byte    // frames to write as they are, between batches
	kicked  <-chan struct{}  // closed when the connection is to end: reasonKicked
	gone    <-chan struct{}  // closed when the peer has gone
	refresh <-chan time.Time // when to call onRefresh
	// onRefresh keeps what the connection holds outside the pod (a client id's
	// claim); false ends it (reasonKicked).
	onRefresh func() bool

	loopState // on the idle loop (see toLoop)
}

// connRoom is one room of a connection.
type connRoom struct {
	name string
	m    *rooms.Member
	q    <-chan *rooms.Item
	sent replay.Position // what the connection has sent of the room
	tok  []byte          // the room's part of the resume token: "." and sent (multiplexed streams)
	// pending is an item a single-room connection's wait took from the queue: the
	// next batch starts with it.
	pending *rooms.Item
	batched int // the events of the batch being gathered
}

// newConn starts a connection of kind over transport t.
func (s *Server) newConn(ctx context.Context, kind connKind, t transport, rooms int) *conn {
	c := &conn{s: s, t: t, kind: kind, ctx: ctx}
	c.idx = -1
	c.cleanup = c.cleanupArr[:0]
	c.rooms = make([]connRoom, 0, rooms)
	if rooms > 1 || kind != kindStream {
		c.bell = make(chan struct{}, 1)
	}
	return c
}

// join makes the connection a member of each room, in order. On an error the rooms
// it joined are left again.
func (c *conn) join(names []string) error {
	for _, name := range names {
		var m *rooms.Member
		var err error
		if c.bell == nil {
			m, err = c.s.rooms.Join(c.ctx, name)
		} else {
			m, err = c.s.rooms.JoinBell(c.ctx, name, c.bell)
		}
		if err != nil {
			c.leave()
			c.rooms = nil
			return err
		}
		// The name is kept apart from the request's line, which would stay
		// with the connection for as long as it lasts.
		c.rooms = append(c.rooms, connRoom{name: strings.Clone(name), m: m, q: m.Queue()})
	}
	return nil
}

// leave leaves every room the connection joined.
func (c *conn) leave() {
	for i := range c.rooms {
		c.s.rooms.Leave(c.rooms[i].m)
	}
}

// members lists the connection's room members.
func (c *conn) members() []*rooms.Member {
	ms := make([]*rooms.Member, len(c.rooms))
	for i := range c.rooms {
		ms[i] = c.rooms[i].m
	}
	return ms
}

// setSent moves room i's sent position to p.
func (c *conn) setSent(i int, p replay.Position) {
	r := &c.rooms[i]
	r.sent = p
	if c.token != nil {
		r.tok = replay.AppendTokenPos(r.tok[:0], p, false)
	}
}

// start sets every room's starting position: where the client resumes it (from[i],
// when resumed[i]), else where its member joined, from which every later event
// reaches it.
func (c *conn) start(from []replay.Position, resumed []bool) {
	for i := range c.rooms {
		if resumed != nil && resumed[i] {
			c.setSent(i, from[i])
		} else {
			c.setSent(i, c.rooms[i].m.Start())
		}
	}
}

// reasonOnLoop is serve's answer for a connection the idle loop took: it goes on,
// and ends there.
const reasonOnLoop rooms.Reason = 1 << 11

// serve runs a connection that has joined its rooms, for its principal, until it
// ends: it registers it (connected), ends it at once when a drain began while it
// joined, sends its opening, replays the rooms that resume and serves live, on its
// goroutine or on the idle loop (reasonOnLoop). It returns why the connection
// ended, once the transport has said its last words. The caller runs the
// connection's cleanups (runCleanup), which serve adds to.
func (c *conn) serve(who auth.Principal, from []replay.Position, resumed []bool) rooms.Reason {
	s := c.s
	// On the loop, the workers' sweep ends the connection when its credential
	// expires, with no timer of its own.
	c.deferEnd(s.connected(who, c.kind, c.members(), !c.loopable))
	if c.loopable && !who.Expires.IsZero() {
		c.expires = who.Expires.Unix()
	}
	if !s.drain.Accepting() {
		// The drain began while this connection was joining: it would miss the
		// drain's own close, so it moves on now.
		return c.end(rooms.ReasonShed)
	}
	c.start(from, resumed)
	if err := c.t.open(c, resumed); err != nil {
		return c.end(reasonFor(c.ctx, err))
	}
	anyResumed := false
	for _, r := range resumed {
		anyResumed = anyResumed || r
	}
	// One connection is one connect, resumed when any of its rooms resumes.
	s.countOpened(anyResumed)
	for i := range c.rooms {
		if !resumed[i] {
			continue
		}
		if err := c.replay(i); err != nil {
			return c.end(reasonFor(c.ctx, err))
		}
	}
	if c.toLoop() {
		return reasonOnLoop
	}
	if c.expires != 0 {
		// It stays on its goroutine after all: a timer ends it.
		c.deferEnd(expireAt(c.rooms[0].m, who.Expires))
	}
	return c.end(c.live())
}

// replay writes room i's history after its sent position, batch by batch, and moves
// the position on. When that position cannot be continued it writes a resync
// (replay.ReadOn decides where to) and goes on with whatever history follows the
// resync point; a bare seq is pinned to the current epoch, so that live events are
// deduplicated against it. The room's latest events serve it when they hold the
// position (rooms.Registry.Since).
func (c *conn) replay(i int) error {
	s, t, r := c.s, c.t, &c.rooms[i]
	b := getBatch()
	defer putBatch(b)
	flush := func(n int) error {
		if len(b.buf) == 0 {
			return nil
		}
		t.record(c)
		if err := t.write(c, b.buf, b.ends); err != nil {
			return err
		}
		s.countDelivered(n)
		b.buf, b.ends, b.clock = b.buf[:0], b.ends[:0], 0
		return nil
	}
	for {
		rd, err := s.rooms.Since(c.ctx, r.name, r.sent, s.cfg.ReplayBatch)
		if err != nil {
			return err
		}
		b.ends = b.ends[:0]
		if rd.Resync {
			s.m.resyncsSent.Inc()
			c.setSent(i, rd.From)
			b.buf = t.appendResync(b.buf, c, i, rd.From, rd.Fork)
			b.ends = append(b.ends, len(b.buf))
		}
		n := 0
		for _, it := range rd.Items {
			c.setSent(i, it.Pos)
			b.buf = c.appendItem(b.buf, i, it, &b.clock)
			b.ends = append(b.ends, len(b.buf))
			n++
			r.batched++
			if len(b.buf) >= batchBytes {
				if err := flush(n); err != nil {
					return err
				}
				n = 0
			}
		}
		if err := flush(n); err != nil {
			return err
		}
		if r.sent.Epoch == "" {
			c.setSent(i, replay.Position{Epoch: rd.Head.Epoch, Seq: r.sent.Seq})
		}
		if !rd.More() {
			t.record(c)
			return nil
		}
	}
}

// readyNow is always ready to receive from: closed.
var readyNow = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// live serves the rooms' queues until the connection ends, and returns why. A
// wake-up gathers one batch round-robin over the rooms (see roundRobin); whatever is
// left is taken by the next batch without waiting, though the transport's own
// channels and the ticker still get their turn: a busy room cannot starve them.
func (c *conn) live() rooms.Reason {
	t := c.t
	tick := time.NewTicker(t.interval())
	defer tick.Stop()
	// The client going away closes the members, which the wait below sees.
	stop := context.AfterFunc(c.ctx, func() {
		for i := range c.rooms {
			c.rooms[i].m.Close(rooms.ReasonClientGone)
		}
	})
	defer stop()
	var single *connRoom
	if c.bell == nil {
		single = &c.rooms[0]
	}
	c.rr = newRoundRobin(len(c.rooms))
	more := true // items may have been queued before the bell was set
	for {
		wake := c.bell
		var q <-chan *rooms.Item
		var done <-chan struct{}
		if more {
			wake = readyNow
		} else if single != nil {
			q, done = single.q, single.m.Done()
		}
		select {
		case <-wake:
		case it, ok := <-q:
			if !ok {
				single.q = single.m.Queue() // the queue grew (see rooms.Member.Queue)
				continue
			}
			single.pending = it
		case <-done:
		case b := <-c.out:
			ob := getBatch()
			ob.ends = append(ob.ends, len(b))
			err := t.write(c, b, ob.ends)
			putBatch(ob)
			if err != nil {
				return reasonFor(c.ctx, err)
			}
			continue
		case <-c.kicked:
			return reasonKicked
		case <-c.gone:
			return rooms.ReasonClientGone
		case now := <-tick.C:
			if reason := t.tick(c, now); reason != 0 {
				return reason
			}
			continue
		case <-c.refresh:
			if !c.onRefresh() {
				return reasonKicked
			}
			continue
		}
		var reason rooms.Reason
		if more, reason = c.step(); reason != 0 {
			return reason
		}
		for _, i := range c.rr.reread {
			// The room resynced past history this connection can still read: read
			// it on from the log; the queue's copies are then skipped.
			if err := c.replay(i); err != nil {
				return reasonFor(c.ctx, err)
			}
			more = true
		}
	}
}

// step is one turn of the delivery core, on a connection's goroutine (live) and on
// the loop (run) alike: a member closed ends the connection; else one batch of the
// rooms' queues is gathered (roundRobin) and written. It reports whether more is
// queued, or the reason the connection ends. Rooms to read on from the log are
// left in c.rr.reread for the caller.
func (c *conn) step() (more bool, reason rooms.Reason) {
	for i := range c.rooms {
		if reason := c.rooms[i].m.Reason(); reason != 0 {
			return false, reason
		}
	}
	s := c.s
	hooks := s.hooks()
	if hooks != nil && hooks.batch != nil {
		hooks.batch(c)
	}
	// The batch is borrowed only while there is something to write, so an idle
	// connection holds none.
	c.batch = getBatch()
	more = c.rr.gather(c)
	n := c.batch.n
	var err error
	if len(c.batch.buf) > 0 {
		c.t.record(c)
		err = c.t.write(c, c.batch.buf, c.batch.ends)
	}
	s.settle(c, err)
	if err != nil {
		return false, rooms.ReasonWriteFailed
	}
	if hooks != nil && hooks.wrote != nil && n > 0 {
		hooks.wrote(c)
	}
	s.countDelivered(n)
	return more, 0
}

// add appends room i's live item to the batch as stepItem decides, moving the
// room's sent position on.
func (c *conn) add(i int, it *rooms.Item) {
	b, r := c.batch, &c.rooms[i]
	st := stepItem(it, r.sent)
	switch {
	case st.skip:
		return
	case st.fork:
		c.addResync(i, it.Pos, true)
		return
	case st.resync:
		if st.dropped {
			c.s.m.policyResyncs[r.m.Policy()].Inc()
		}
		c.addResync(i, st.resyncAt, false)
	case !st.event:
		// A resync notice of the room.
		c.addResync(i, it.Pos, false)
		return
	}
	c.setSent(i, it.Pos)
	b.buf = c.appendItem(b.buf, i, it, &b.clock)
	b.ends = append(b.ends, len(b.buf))
	b.n++
	b.ts = append(b.ts, it.TS())
	r.batched++
}

// addResync appends to the batch the notice that room i continues after head.
func (c *conn) addResync(i int, head replay.Position, fork bool) {
	c.s.m.resyncsSent.Inc()
	c.setSent(i, head)
	b := c.batch
	b.buf = c.t.appendResync(b.buf, c, i, head, fork)
	b.ends = append(b.ends, len(b.buf))
}

// full reports whether the batch being gathered has reached batchBytes.
func (c *conn) full() bool { return len(c.batch.buf) >= batchBytes }

// end closes every member with reason, unless one was closed first, which then says
// why (a failed write stays the reason: the broken connection may also have closed a
// member as gone), counts the end and has the transport say its last words. It
// returns the reason that counted.
func (c *conn) end(reason rooms.Reason) rooms.Reason {
	select {
	case <-c.kicked:
		// A kick says why, whatever else went wrong meanwhile (a nil kicked never
		// fires).
		reason = reasonKicked
	default:
	}
	if reason == reasonKicked {
		for i := range c.rooms {
			c.rooms[i].m.Close(rooms.ReasonClientGone)
		}
		c.t.end(c, reasonKicked)
		return reasonKicked
	}
	if reason != rooms.ReasonWriteFailed {
		for i := range c.rooms {
			if r := c.rooms[i].m.Reason(); r != 0 {
				reason = r
				break
			}
		}
	}
	c.s.closeAll(reason, c.members())
	c.s.m.streamsClosed.WithLabelValues(reason.String()).Inc()
	c.t.end(c, reason)
	return reason
}

// closeAll closes a connection's members with reason. When the reason is a failed
// write that dropped the client, it counts the drop, unless a member was closed
// before for a reason of its own (a slow consumer while the write was blocked, a
// shed): that reason is the drop, counted already.
func (s *Server) closeAll(reason rooms.Reason, members []*rooms.Member) {
	prior := false
	for _, m := range members {
		if r := m.Reason(); r != 0 && r != rooms.ReasonClientGone {
			prior = true
		}
	}
	for _, m := range members {
		m.Close(reason)
	}
	if reason == rooms.ReasonWriteFailed && !prior {
		s.writeDrops.Add(1)
	}
}

func (s *Server) countDelivered(n int) {
	s.m.delivered.Add(float64(n))
}

// deliveredSoFar is the pod's count of delivered events (countDelivered), read
// off the hot path.
func (s *Server) deliveredSoFar() float64 {
	return value(s.m.delivered)
}

// itemStep is what a reader that has sent up to a position does with one live item
// (see stepItem).
type itemStep struct {
	// skip: the reader already sent the item's position; nothing goes out.
	skip bool
	// fork: the item is a fork's resync, which always goes through.
	fork bool
	// resyncAt, when resync is set, is the resync sent before the item's event: the
	// event comes from another epoch than the one the reader is in.
	resync   bool
	resyncAt replay.Position
	// event: the item is an event (not a resync notice) that goes out.
	event bool
	// dropped: the resync before the event stands for events of the reader's epoch
	// that its queue dropped.
	dropped bool
}

// stepItem decides what a reader at sent does with it. A live event from an epoch
// other than the one the reader is in, or past the next seq of its epoch (its queue
// dropped the events between), is preceded by a resync, so a history is never
// mixed with another or cut silently. A resync at or behind what the reader sent in its epoch is
// dropped (the reader read past it from the log), unless it reports a fork, which
// always goes through.
func stepItem(it *rooms.Item, sent replay.Position) itemStep {
	switch {
	case it.Fork:
		return itemStep{fork: true}
	case it.Pos.Epoch == sent.Epoch && it.Pos.Seq <= sent.Seq:
		return itemStep{skip: true}
	case it.Resync:
		return itemStep{}
	case sent.Epoch != "" && it.Pos.Epoch != sent.Epoch:
		return itemStep{resync: true, resyncAt: replay.Position{Epoch: it.Pos.Epoch, Seq: it.Pos.Seq - 1}, event: true}
	case it.Pos.Seq > sent.Seq+1 && (sent.Epoch != "" || sent.Seq == 0):
		// The room's queue policy dropped the events between (rooms.Policy); from a
		// room's start (no epoch, seq 0), the first event is seq 1.
		return itemStep{resync: true, resyncAt: replay.Position{Epoch: it.Pos.Epoch, Seq: it.Pos.Seq - 1}, event: true, dropped: true}
	}
	return itemStep{event: true}
}

// readable reports whether it is a resync of the room that the connection need not
// take: the room's lost history begins before what the connection has sent (it read
// further from the log on resume), and the resync is ahead of it, so the log may
// still hold what lies between.
func readable(it *rooms.Item, sent replay.Position) bool {
	return it.Resync && !it.Fork && it.After.Epoch == sent.Epoch && sent.Seq > it.After.Seq &&
		it.Pos.Epoch == sent.Epoch && it.Pos.Seq > sent.Seq
}

// tryRecv takes the next item of m's queue without waiting, moving *q on to the
// member's new queue when the one it holds was replaced (see rooms.Member.Queue).
func tryRecv(q *<-chan *rooms.Item, m *rooms.Member) (*rooms.Item, bool) {
	for {
		select {
		case it, ok := <-*q:
			if ok {
				return it, true
			}
			*q = m.Queue()
		default:
			return nil, false
		}
	}
}
