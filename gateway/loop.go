package gateway

import (
	"context"
	"errors"
	"math"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roomcast/roomcast/rooms"
)

// The idle loop (Config.IdleLoop). A connection's request goroutine joins its rooms
// and writes its opening and replay through net/http as ever; then the connection
// leaves net/http (a hijack) and one of the pod's event-loop workers (pollers,
// loopWorkers per core) serves it: the rooms' fan-out wakes the connection
// (rooms.Waker), the worker gathers a batch with the same core as a goroutine's
// (conn.step) and writes what the socket takes without blocking, keeping the rest
// for the socket's next writable edge. The worker sweeps its connections every loop period
// for their timers (heartbeats, pings, the write deadline, the credential's
// expiry), so no connection holds a goroutine, a timer or a buffer while it waits.
// What must block (a history read from the log) runs on a goroutine of its own
// while the worker leaves the connection alone (detached), and hands it back.

// errPeerClosed is a read's end of the peer's writing.
var errPeerClosed = errors.New("the peer closed its end")

// loop is the pod's event-loop workers.
type loop struct {
	s       *Server
	ps      []*poller
	next    atomic.Uint32
	period  time.Duration // how often a worker sweeps its connections' timers
	workers sync.WaitGroup
	open    atomic.Int64 // connections in the workers' sets
	// Connections taken on since the memory was last given back (trim), and
	// when the last came, Unix nanoseconds.
	taken     atomic.Int64
	lastTaken atomic.Int64
	// trimming: a trim is under way, from its first collection to its second;
	// trimAt is when its first collection ended (0: not yet, or the second has
	// begun), and trimFrom the pod's delivered events then (math.Float64bits).
	trimming atomic.Bool
	trimAt   atomic.Int64
	trimFrom atomic.Uint64
	// ctx is the context of the connections on the loop, whose requests are over.
	ctx context.Context
}

func newLoop(s *Server) *loop {
	l := &loop{s: s, ctx: context.Background(), period: loopPeriod(s.cfg)}
	for range loopWorkers * runtime.GOMAXPROCS(0) {
		l.ps = append(l.ps, newPoller(l))
	}
	return l
}

// loopWorkers is how many event-loop workers the pod runs per core (GOMAXPROCS).
// One per core leaves a core's connections waiting whenever its worker is held (a
// long batch, a sweep, the collector's assist) while the other core has time; two
// per core measured a lower tail latency on many small rooms (9,500 rooms of two
// at 5,000 publishes/s on 2 cores: p99 14.3 to 15.4 ms against 16.4 to 18.4 ms with
// one), four per core a higher one again. An idle worker holds nothing.
const loopWorkers = 2

// loopPeriod is how often the workers sweep each of their connections: a quarter
// of the shortest timer a connection keeps (half the heartbeat, at which a stream
// ticks; the write timeout; the ping and its pong's deadline), within 5ms and
// 250ms. A worker sweeps its connections a slice at a time (sweepSlices), so that
// a sweep never holds it from its sockets for long.
func loopPeriod(cfg Config) time.Duration {
	d := min(cfg.Heartbeat/2, cfg.WriteTimeout, cfg.WSPing, cfg.WSPongTimeout) / 4
	return min(max(d, 5*time.Millisecond), 250*time.Millisecond)
}

// Once a burst of new connections has settled (trimAfter connections taken on,
// then trimQuiet without one), the pod gives back to the system the memory the
// burst went through: each connection's request, buffers and goroutine were
// garbage once the loop took it, and the runtime would otherwise keep that memory
// as headroom for a heap the idle connections never grow back to. It costs two
// garbage collections per burst. Handing the memory back at once
// (debug.FreeOSMemory) holds a processor for tens of milliseconds after a burst of
// thousands, and the next collection's stop-the-world waits behind it: the trim
// does it only when the pod delivered no event for trimIdle; otherwise it leaves
// the freed memory to the runtime's background scavenger, which returns it over the
// next seconds without a pause (9,500 rooms of two at 5,000 publishes/s: a p99 of
// 15 to 19 ms with the hand-back in the window, 10 to 15 ms without it).
const (
	trimAfter = 1000
	trimQuiet = 2 * time.Second
	trimIdle  = 500 * time.Millisecond
)

// tookOn counts a connection the loop took on.
func (l *loop) tookOn(now time.Time) {
	l.taken.Add(1)
	l.lastTaken.Store(now.UnixNano())
}

// trim gives the memory of a settled burst back (see trimAfter), off the worker,
// in two steps the workers' sweeps start: a collection, then, trimIdle later, the
// second collection, which hands the memory back at once only when no event was
// delivered meanwhile.
func (l *loop) trim(now time.Time) {
	if at := l.trimAt.Load(); at != 0 {
		if now.UnixNano()-at < int64(trimIdle) || !l.trimAt.CompareAndSwap(at, 0) {
			return
		}
		quiet := l.s.deliveredSoFar() == math.Float64frombits(l.trimFrom.Load())
		go func() {
			defer l.trimming.Store(false)
			if quiet {
				debug.FreeOSMemory() // a collection, then the memory back
			} else {
				runtime.GC() // the scavenger gives it back over the next seconds
			}
		}()
		return
	}
	if l.taken.Load() < trimAfter || now.UnixNano()-l.lastTaken.Load() < int64(trimQuiet) || !l.trimming.CompareAndSwap(false, true) {
		return
	}
	l.taken.Store(0)
	go func() {
		// The burst's buffers went back to their pools (sync.Pool), which keep
		// them through one collection: this one leaves them as the pools'
		// victims, the second frees them.
		runtime.GC()
		l.trimFrom.Store(math.Float64bits(l.s.deliveredSoFar()))
		l.trimAt.Store(time.Now().UnixNano())
	}()
}

// pick is the worker a new connection goes to, in turn.
func (l *loop) pick() *poller {
	return l.ps[int(l.next.Add(1))%len(l.ps)]
}

// loopTransport is what a transport that hears from its peer adds to serve it on
// the loop (a WebSocket connection); a stream's peer has nothing to say, and the
// worker reads and drops its bytes (readSocket).
type loopTransport interface {
	// readable reads what the socket has (non-blocking, readNB on c.fd) and serves
	// it; a non-zero reason ends the connection (rooms.ReasonClientGone: the peer
	// went away).
	readable(c *conn) rooms.Reason
	// beforeBatch runs on every turn of the connection before its rooms' batch:
	// answers waiting to be written go out (c.send), a kick ends it (reasonKicked).
	beforeBatch(c *conn) rooms.Reason
}

// loopState is what a connection on the loop holds besides the delivery core's
// state: its socket, its place on its worker, and the bytes the socket has not
// taken yet.
type loopState struct {
	// loopable: the connection may go to the loop once it has opened (toLoop).
	loopable bool
	// hijack takes the connection out of net/http, set by its transport.
	hijack func() (net.Conn, error)
	// onLoop: the loop took the connection; its cleanups run when it ends there.
	onLoop     bool
	cleanup    []func()
	cleanupArr [4]func() // cleanup's first, without an allocation of its own

	p      *poller
	fd     int         // the socket, the loop's own (adopt)
	idx    int         // in p.conns; -1 when not there
	gen    int32       // the connection's generation on its worker (sockNews)
	queued atomic.Bool // on p.runq
	ev     atomic.Uint32
	// detached: a goroutine serves the connection for now (a history read); the
	// worker leaves it alone until it is handed back.
	detached atomic.Bool
	ended    bool
	// abort: the connection is dropped without its last bytes (a client that could
	// not keep up), as its transport's end decided.
	abort bool

	pend  []byte  // what the socket has not taken yet
	pendp *[]byte // the pooled buffer pend is in
	// Unix nanoseconds: while pend is not empty, when the socket last took bytes;
	// the last write; the transport's last tick.
	stuck, lastWrite, ticked int64
	expires                  int64 // Unix seconds the credential expires at; 0: never
}

// deferEnd has fn run when the connection ends, before the ones added earlier
// (last first, as defers run).
func (c *conn) deferEnd(fn func()) { c.cleanup = append(c.cleanup, fn) }

// runCleanup runs the connection's cleanups, last first, unless the loop took it:
// the request goroutine defers it.
func (c *conn) runCleanup() {
	if c.onLoop {
		return
	}
	c.cleanupNow()
}

func (c *conn) cleanupNow() {
	for i := len(c.cleanup) - 1; i >= 0; i-- {
		c.cleanup[i]()
	}
	c.cleanup = nil
}

// Wake is the rooms' wake-up of a connection on the loop (rooms.Waker).
func (c *conn) Wake() { c.p.wake(c) }

// toLoop hands the connection to an event-loop worker. It reports false when the
// connection stays on its request goroutine: not loopable, or the hijack failed.
func (c *conn) toLoop() bool {
	if !c.loopable || c.hijack == nil {
		return false
	}
	nc, err := c.hijack()
	c.hijack = nil
	if err != nil {
		return false
	}
	if lc, ok := nc.(*limitedConn); ok {
		lc.onLoop()
	}
	if h := c.s.hooks(); h != nil && h.closed != nil {
		// The peer is gone from the socket once it reset the connection.
		h.peers.Store(c, nc.RemoteAddr().String())
	}
	// The loop keeps the socket alone: a duplicate of its descriptor, with the
	// connection closed, so that no net.Conn, poll descriptor or address stays
	// with an idle stream.
	fd, err := adopt(nc)
	c.onLoop = true
	if err != nil {
		// Not a socket the loop can take (net/http serves TCP connections): the
		// stream is dropped, and its client resumes.
		c.s.cfg.Logger.Warn("idle loop: cannot take the connection; dropped", "err", err)
		_ = nc.Close()
		c.ended = true
		c.end(rooms.ReasonWriteFailed)
		c.cleanupNow()
		return true
	}
	c.fd = fd
	c.ctx = c.s.loop.ctx
	c.rr = newRoundRobin(len(c.rooms))
	now := time.Now().UnixNano()
	c.lastWrite, c.ticked = now, now
	c.p = c.s.loop.pick()
	for i := range c.rooms {
		c.rooms[i].m.SetWaker(c)
	}
	c.bell = nil // the members wake the worker now
	if err := c.p.add(c); err != nil {
		c.s.cfg.Logger.Error("idle loop: cannot take a connection", "err", err)
		c.ended = true
		c.end(rooms.ReasonWriteFailed)
		c.closeSocket()
		c.cleanupNow()
	}
	return true
}

// attached records the connection's place on its worker (-1: none).
func (c *conn) attached(idx int) { c.idx = idx }

// run serves the connection on its worker: its socket's news, what it has not
// written yet, then one batch of its rooms' queues, as live does per wake-up.
func (c *conn) run() {
	if c.ended || c.detached.Load() {
		return
	}
	lt, _ := c.t.(loopTransport)
	ev := c.ev.Swap(0)
	if ev&(evIn|evHup) != 0 {
		var reason rooms.Reason
		if lt != nil {
			reason = lt.readable(c)
		} else {
			reason = c.readSocket()
		}
		if reason != 0 {
			c.finish(reason)
			return
		}
	}
	if len(c.pend) > 0 {
		if err := c.flushPend(); err != nil {
			c.finish(rooms.ReasonWriteFailed)
			return
		}
		if len(c.pend) > 0 {
			return // the socket's next writable edge runs it again
		}
	}
	if lt != nil {
		if reason := lt.beforeBatch(c); reason != 0 {
			c.finish(reason)
			return
		}
		if len(c.pend) > 0 {
			return
		}
	}
	more, reason := c.step()
	if reason != 0 {
		c.finish(reason)
		return
	}
	if len(c.rr.reread) > 0 {
		reread := append([]int(nil), c.rr.reread...)
		c.detach(func() error {
			for _, i := range reread {
				if err := c.replay(i); err != nil {
					return err
				}
			}
			return nil
		})
		return
	}
	if more && len(c.pend) == 0 {
		c.p.wake(c) // after the other woken connections: one batch a turn
	}
}

// readSocket takes what the peer sent. A stream's client has nothing to say after
// its request: bytes are read and dropped, and the end of its writing (a close, a
// half-close) ends the stream as gone, as net/http's read of a handler's
// connection does.
func (c *conn) readSocket() rooms.Reason {
	buf := c.p.readBuf()
	for range 16 {
		n, err := readNB(c.fd, buf)
		if err != nil {
			return rooms.ReasonClientGone
		}
		if n < len(buf) {
			return 0
		}
	}
	// A peer that keeps sending gets its turn again on the next edge; the
	// socket's buffer bounds what waits.
	c.ev.Or(evIn)
	c.p.wake(c)
	return 0
}

// flushPend writes pend: on the worker, what the socket takes now; detached, all of
// it within the write timeout.
func (c *conn) flushPend() error {
	if len(c.pend) == 0 {
		return nil
	}
	if c.detached.Load() {
		err := writeBlocking(c.fd, c.pend, c.s.cfg.WriteTimeout)
		c.releasePend()
		if err != nil {
			return err
		}
		c.lastWrite = time.Now().UnixNano()
		return nil
	}
	now := time.Now().UnixNano()
	for len(c.pend) > 0 {
		n, err := writeNB(c.fd, c.pend)
		if err != nil {
			return err
		}
		if n == 0 {
			if c.stuck == 0 {
				c.stuck = now
			}
			return nil
		}
		c.pend = c.pend[n:]
		c.stuck = now
	}
	c.releasePend()
	c.stuck = 0
	c.lastWrite = now
	return nil
}

// pendBuf returns pend to append to, in a pooled buffer while it is empty.
func (c *conn) pendBuf() []byte {
	if c.pendp == nil {
		c.pendp = bufPool.Get().(*[]byte)
		c.pend = (*c.pendp)[:0]
	}
	return c.pend
}

// releasePend gives pend's buffer back once the socket took all of it.
func (c *conn) releasePend() {
	if c.pendp != nil {
		*c.pendp = (*c.pendp)[:0]
		putBuf(c.pendp)
		c.pendp = nil
	}
	c.pend = nil
}

// send queues bytes, framed for the socket already, and writes what it can: when
// nothing waits, the parts go out in one writev, and only what the socket did not
// take is copied.
func (c *conn) send(parts ...[]byte) error {
	if len(c.pend) == 0 && !c.detached.Load() {
		n, err := c.p.writev(c.fd, parts)
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		for _, b := range parts {
			if n >= len(b) {
				n -= len(b)
				continue
			}
			c.pend = append(c.pendBuf(), b[n:]...)
			n = 0
		}
		if len(c.pend) == 0 {
			c.lastWrite = now
			return nil
		}
		c.stuck = now
		return nil
	}
	for _, b := range parts {
		c.pend = append(c.pendBuf(), b...)
	}
	return c.flushPend()
}

// sweep runs the connection's timers: the write deadline, the credential's expiry,
// and its transport's tick.
func (c *conn) sweep(now time.Time) {
	if c.ended || c.detached.Load() {
		return
	}
	ns := now.UnixNano()
	if len(c.pend) > 0 && c.stuck != 0 && time.Duration(ns-c.stuck) >= c.s.cfg.WriteTimeout {
		c.finish(rooms.ReasonWriteFailed)
		return
	}
	if c.expires != 0 && now.Unix() >= c.expires {
		c.rooms[0].m.Close(rooms.ReasonReauth)
		c.run()
		return
	}
	if time.Duration(ns-c.ticked) >= c.t.interval() {
		c.ticked = ns
		if reason := c.t.tick(c, now); reason != 0 {
			c.finish(reason)
		}
	}
}

// detach runs fn, which may block (a history read from the log, a call to Redis),
// on a goroutine of its own, where the connection's writes block too, within the
// write timeout; the worker leaves the connection alone meanwhile and serves it
// again once fn returns. An error of fn ends the connection, on its worker.
func (c *conn) detach(fn func() error) {
	c.detached.Store(true)
	go func() {
		if err := fn(); err != nil {
			// A connection ends on its worker alone: a closed member ends it there.
			c.rooms[0].m.Close(reasonFor(c.ctx, err))
		}
		c.detached.Store(false)
		c.p.wake(c)
	}()
}

// finish ends a connection on the loop, on its worker: it leaves the worker's set,
// ends as the core does (end: the members closed, the end counted, the transport's
// last words queued), writes what is left, closes the socket and runs the
// connection's cleanups. What the socket does not take at once is written by a
// goroutine of its own within the write timeout.
func (c *conn) finish(reason rooms.Reason) {
	if c.ended {
		return
	}
	c.ended = true
	if c.idx >= 0 && c.p != nil {
		c.p.remove(c)
	}
	reason = c.end(reason)
	abort := reason == rooms.ReasonWriteFailed || c.abort
	if !abort {
		if err := c.flushPend(); err != nil {
			abort = true
		}
	}
	if abort || len(c.pend) == 0 {
		c.releasePend()
		c.closeSocket()
	} else {
		c.detached.Store(true)
		go func() {
			_ = c.flushPend()
			c.closeSocket()
		}()
	}
	c.cleanupNow()
}

// closeSocket closes the connection's socket.
func (c *conn) closeSocket() {
	_ = closeFD(c.fd)
	if h := c.s.hooks(); h != nil && h.closed != nil {
		peer, _ := h.peers.LoadAndDelete(c)
		s, _ := peer.(string)
		h.closed(s)
	}
}
