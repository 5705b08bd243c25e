package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/gobwas/ws"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// WebSocket connections on the idle loop (Config.IdleLoop). The request goroutine
// upgrades the connection, reads the hello with blocking reads (the hello timeout is
// the read deadline), and joins, welcomes and replays through the delivery core with
// blocking writes of frames it frames itself, as the library's path does; then the
// connection goes to a worker of the loop (conn.toLoop). There the worker parses the
// client's frames as the socket gives them (wsParser), answers pings and acks itself
// and hands publishes, which call the log, to a goroutine that serves them one at a
// time in the order they came and exists only while some wait. The sweep pings the
// peer, closes a silent one and refreshes the client's claim (detached: a call to the
// registry). An idle connection holds no goroutine, timer or buffer.

// wsUpgrader upgrades a connection that passed the handler's checks; it negotiates
// no extension and no subprotocol.
var wsUpgrader = ws.HTTPUpgrader{}

// wsLoopSide is what a connection served on the loop keeps besides wsConn.
type wsLoopSide struct {
	nc     *wsLingerConn // the upgraded connection
	parser wsParser      // the worker's, once on the loop

	// The worker's, once on the loop.
	paused     bool      // reading stopped while the queue of frames to serve is full
	peerClosed bool      // the peer sent its close, answered already
	pinged     time.Time // when the last ping went out
	refreshAt  time.Time // when the client's claim is refreshed next

	// released: the connection let its client go when it ended on the loop.
	released bool

	// live is the connection once its worker has served it: kicks and answers
	// from other goroutines wake it.
	live atomic.Pointer[conn]

	mu sync.Mutex
	// jobs are frames waiting to be served off the worker, in arrival order;
	// serving is set while a goroutine serves them.
	jobs    []func()
	serving bool
	// answers are frames to write, in the order of what they answer.
	answers [][]byte
}

// wake has the worker serve the connection, once it is on the loop.
func (lp *wsLoopSide) wake() {
	if c := lp.live.Load(); c != nil {
		c.Wake()
	}
}

// answer queues an answer for the worker, which writes it before the next batch.
func (lp *wsLoopSide) answer(b []byte) {
	lp.mu.Lock()
	lp.answers = append(lp.answers, b)
	lp.mu.Unlock()
	lp.wake()
}

// full reports whether as many frames wait to be served or written as the
// connection may keep: the worker stops reading until they drain.
func (lp *wsLoopSide) full() bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return len(lp.jobs)+len(lp.answers) >= wsOutQueue
}

// busy reports whether frames wait to be served off the worker: later frames wait
// behind them, so that answers keep the order of the frames they answer.
func (lp *wsLoopSide) busy() bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.serving
}

// later queues job behind the frames waiting off the worker, starting a goroutine
// to serve them when none runs.
func (lp *wsLoopSide) later(job func()) {
	lp.mu.Lock()
	lp.jobs = append(lp.jobs, job)
	start := !lp.serving
	lp.serving = true
	lp.mu.Unlock()
	if start {
		go lp.serve()
	}
}

// serve runs the queued jobs, one at a time, until none is left.
func (lp *wsLoopSide) serve() {
	for {
		lp.mu.Lock()
		if len(lp.jobs) == 0 {
			lp.serving, lp.jobs = false, nil
			lp.mu.Unlock()
			lp.wake() // a worker that stopped reading reads on
			return
		}
		job := lp.jobs[0]
		lp.jobs[0] = nil
		lp.jobs = lp.jobs[1:]
		lp.mu.Unlock()
		job()
		lp.wake()
	}
}

// writeNow writes p as a text frame with a blocking write, within timeout: the
// request goroutine's writes, before the loop takes the connection.
func (lp *wsLoopSide) writeNow(timeout time.Duration, p []byte) error {
	var hdr [10]byte
	return lp.writeBlocking(timeout, appendWSFrameHeader(hdr[:0], ws.OpText, len(p)), p)
}

func (lp *wsLoopSide) writeBlocking(timeout time.Duration, parts ...[]byte) error {
	_ = lp.nc.SetWriteDeadline(time.Now().Add(timeout))
	bufs := net.Buffers(parts)
	_, err := bufs.WriteTo(lp.nc)
	return err
}

// wsOnLoop serves a WebSocket connection that passed the handler's checks (origin,
// credential, admission: release gives its place back) on the idle loop's path.
func (s *Server) wsOnLoop(w http.ResponseWriter, r *http.Request, who auth.Principal, release func()) {
	nc, rw, _, err := wsUpgrader.Upgrade(r, w)
	if err != nil {
		// The upgrader answered the request (not a WebSocket handshake).
		release()
		return
	}
	wc := s.newWSConn(r, who, true)
	limit := int(s.cfg.MaxBody + wsEnvelopeSlack)
	lp := &wsLoopSide{nc: &wsLingerConn{Conn: nc, limit: limit}}
	lp.parser.limit = limit
	wc.lp = lp
	s.wsOpen.Add(1)
	// ends run when the connection ends, last first: here, or on the loop.
	ends := []func(){release, func() { s.wsOpen.Add(-1) }, wc.cancel}
	c := wc.runOnLoop(rw.Reader, &ends)
	if c != nil && c.onLoop {
		return
	}
	// It ended here: the close, the socket, the cleanups.
	wc.closing(wc.code, wc.why)
	if wc.code != 0 && !lp.peerClosed {
		lp.nc.linger = true
		_ = lp.writeBlocking(s.cfg.WriteTimeout, appendWSClose(nil, int(wc.code), wc.why))
	}
	_ = lp.nc.Close()
	if c != nil {
		c.runCleanup()
	}
	for i := len(ends) - 1; i >= 0; i-- {
		ends[i]()
	}
}

// runOnLoop reads the hello, applies it and serves the connection through the
// core, which hands it to the loop; it returns the core's connection (nil when it
// ended before it joined). wc.code and wc.why say how a connection that did not go
// to the loop closes. What *ends holds when the connection joins becomes the core's
// cleanups: they run where it ends.
func (wc *wsConn) runOnLoop(br *bufio.Reader, ends *[]func()) *conn {
	s, lp := wc.s, wc.lp
	if h := s.hooks(); h != nil && h.beforeHello != nil {
		h.beforeHello(readyNow) // no reader goroutine to wait for
	}
	f, code, why := wc.readHello(br)
	if code != 0 || lp.peerClosed {
		wc.code, wc.why = code, why
		return nil
	}
	fail := func(code websocket.StatusCode, why string) *conn {
		wc.code, wc.why = code, why
		return nil
	}
	if replay.ValidClient(f.Client) {
		wc.client = f.Client // for the close's log line, even when the hello is bad
	}
	h, err := parseHello(f, s.cfg.MaxRoomsPerStream, time.Now().Add(wsBootSkew))
	if err != nil {
		return fail(wsBadHello, "bad hello: "+err.Error())
	}
	wc.client, wc.boot, wc.agent = h.client, h.boot, h.agent
	if code, why := wc.checkClient(); code != 0 {
		return fail(code, why)
	}
	if code, why := wc.checkGrants(h.names); code != 0 {
		return fail(code, why)
	}
	if code, why := wc.claim(); code != 0 {
		return fail(code, why)
	}
	*ends = append(*ends, func() {
		if !lp.released {
			wc.unregister()
		}
	}, func() {
		for _, release := range wc.releases {
			release()
		}
	})
	if code, why := wc.join(h); code != 0 {
		return fail(code, why)
	}
	c := wc.conn
	for _, fn := range *ends {
		c.deferEnd(fn)
	}
	*ends = nil
	c.deferEnd(c.leave)
	c.t = wsLoopConn{wc}
	c.kicked = wc.kicked
	c.loopable = true
	c.hijack = func() (net.Conn, error) {
		// The connection is out of net/http since its upgrade: this hands it
		// over, and must not fail, for it has no goroutine to serve it otherwise.
		if lc, ok := lp.nc.Conn.(*limitedConn); ok {
			// Out of its address's count for good, as any connection the loop
			// serves (toLoop sees the wrapper, not the limitedConn).
			lc.onLoop()
		}
		now := time.Now()
		lp.pinged, lp.refreshAt = now, now.Add(s.cfg.OwnerTTL/3)
		if lp.parser.pending() {
			// Frames the client sent right after its hello are parsed first.
			c.ev.Or(evIn)
		}
		// What the connection keeps of its upgrade request is what its
		// publishes are checked with (the bearer credential, the peer's
		// address), not the request with its headers and context.
		wc.authz, wc.remote = wc.r.Header.Values("Authorization"), wc.r.RemoteAddr
		wc.r = nil
		nc := lp.nc
		lp.nc = nil // the loop adopts the socket and closes nc
		return nc, nil
	}
	c.serve(wc.who, h.from, h.resumed)
	return c
}

// publishRequest is what a WebSocket connection's publishes read of its upgrade
// request (Server.publisher): the request itself on the library's path; on the
// loop, which keeps no request, one made of its Authorization header and the peer's
// address.
func (wc *wsConn) publishRequest() *http.Request {
	if wc.r != nil {
		return wc.r
	}
	r := &http.Request{RemoteAddr: wc.remote}
	if len(wc.authz) > 0 {
		r.Header = http.Header{"Authorization": wc.authz}
	}
	return r
}

// readHello reads frames with blocking reads until the hello, within the hello
// timeout, answering pings on the way; a non-zero code refuses the connection. Bytes
// the client sent after the hello stay in the parser for the loop.
func (wc *wsConn) readHello(br *bufio.Reader) (wsFrame, websocket.StatusCode, string) {
	s, lp := wc.s, wc.lp
	timeout := s.cfg.WSHelloTimeout
	_ = lp.nc.SetReadDeadline(time.Now().Add(timeout))
	bp := bufPool.Get().(*[]byte)
	defer putBuf(bp)
	buf := (*bp)[:cap(*bp)]
	var (
		f    wsFrame
		got  bool
		code websocket.StatusCode
		why  string
	)
	handle := func(op ws.OpCode, payload []byte) bool {
		wc.lastSeen.Store(time.Now().UnixNano())
		switch op {
		case ws.OpPing:
			var hdr [2]byte
			_ = lp.writeBlocking(s.cfg.WriteTimeout, appendWSFrameHeader(hdr[:0], ws.OpPong, len(payload)), payload)
			return true
		case ws.OpPong:
			return true
		case ws.OpClose:
			lp.peerClosed = true
			_ = lp.writeBlocking(s.cfg.WriteTimeout, appendWSEcho(payload))
			return false
		case ws.OpBinary:
			code, why = wsBadHello, "bad hello: frames are JSON text messages"
			return false
		}
		var err error
		if f, err = decodeWSFrame(payload); err != nil {
			code, why = wsBadHello, "bad hello: "+err.Error()
			return false
		}
		got = true
		return false
	}
	for !got && code == 0 && !lp.peerClosed {
		n, err := br.Read(buf)
		if n > 0 {
			if _, v := lp.parser.feed(buf[:n], handle); v != nil {
				return f, websocket.StatusCode(v.code), v.reason
			}
			continue
		}
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return f, wsTimeout, "no hello within " + timeout.String()
		case err != nil:
			return f, 0, "" // the peer went away
		}
	}
	if got {
		if n := br.Buffered(); n > 0 {
			rest, _ := br.Peek(n)
			lp.parser.part = append(lp.parser.part, rest...)
		}
	}
	return f, code, why
}

// appendWSEcho is the answer to a peer's close: its code echoed, or an empty close.
func appendWSEcho(payload []byte) []byte {
	if len(payload) < 2 {
		return appendWSClose(nil, 0, "")
	}
	return appendWSClose(nil, int(payload[0])<<8|int(payload[1]), "")
}

// wsLoopConn is the WebSocket transport of a connection on the idle loop's path:
// wsConn's framing and state, its own writes, timers and reading.
type wsLoopConn struct{ *wsConn }

var _ loopTransport = wsLoopConn{}

// write sends a batch of frames, each behind its header: with blocking writes
// before the loop has the connection, then with the worker's (c.send).
func (t wsLoopConn) write(c *conn, buf []byte, ends []int) error {
	if len(ends) == 0 {
		return nil
	}
	var hdrs [16 * 10]byte
	var partsArr [32][]byte
	hb, parts := hdrs[:0], partsArr[:0]
	if len(ends) > 16 {
		hb, parts = make([]byte, 0, 10*len(ends)), make([][]byte, 0, 2*len(ends))
	}
	start := 0
	for _, end := range ends {
		h := len(hb)
		hb = appendWSFrameHeader(hb, ws.OpText, end-start)
		parts = append(parts, hb[h:], buf[start:end])
		start = end
	}
	if !c.onLoop {
		return t.lp.writeBlocking(t.s.cfg.WriteTimeout, parts...)
	}
	return c.send(parts...)
}

// interval is how often the sweep looks at the connection's timers: the ping, its
// pong's deadline and the claim's refresh (wsalive.go).
func (t wsLoopConn) interval() time.Duration { return t.sweepEvery() }

// tick keeps the connection's liveness (wsalive.go) and refreshes the client's
// claim every third of its TTL, off the worker (a call to the registry).
func (t wsLoopConn) tick(c *conn, now time.Time) rooms.Reason {
	s, lp := t.s, t.lp
	if reason := t.liveness(c, now); reason != 0 {
		return reason
	}
	if !now.Before(lp.refreshAt) {
		lp.refreshAt = now.Add(s.cfg.OwnerTTL / 3)
		// A refresh that finds another owner kicks the connection, which wakes it.
		c.detach(func() error { t.refresh(); return nil })
	}
	return 0
}

var wsPingFrame = appendWSFrameHeader(nil, ws.OpPing, 0)

// end decides the close (wsConn.end) and, on the loop, queues the close frame:
// finish writes it and closes the socket. The request goroutine writes its own.
func (t wsLoopConn) end(c *conn, reason rooms.Reason) {
	t.wsConn.end(c, reason)
	if !c.onLoop {
		return
	}
	// The pod forgets the connection before its peer hears the close, as on the
	// library's path, so that the client's next connection finds no stale one;
	// the registry's release is a call to Redis, which must not hold the worker.
	t.lp.released = true
	t.forget()
	go t.releaseClaim()
	t.closing(t.code, t.why)
	if t.lp.peerClosed || t.code == 0 || c.fd < 0 {
		return
	}
	if err := c.send(appendWSClose(nil, int(t.code), t.why)); err != nil {
		return
	}
	// The socket outlives the worker's descriptor (finish closes it) until the
	// peer has answered the close.
	if f, err := dupSocket(c.fd); err == nil {
		go lingerClose(f, t.lp.parser.limit)
	}
}

// wsCloseLinger bounds how long a closed connection's socket waits for its peer
// to answer the close.
const wsCloseLinger = 5 * time.Second

// lingerReader is a socket that lingerClose reads.
type lingerReader interface {
	io.ReadCloser
	SetReadDeadline(time.Time) error
}

// lingerClose closes a WebSocket connection's socket once its close frame is out,
// as RFC 6455 asks: it reads on, dropping what comes, until the peer's close
// answers it, the peer closes its end or wsCloseLinger passes. A peer that still
// answers pings sent before the close then meets no reset, which would lose the
// close frame on its way.
func lingerClose(rc lingerReader, limit int) {
	defer rc.Close()
	_ = rc.SetReadDeadline(time.Now().Add(wsCloseLinger))
	p := wsParser{limit: limit}
	var b [512]byte
	for {
		n, err := rc.Read(b[:])
		if n > 0 {
			stopped, v := p.feed(b[:n], func(op ws.OpCode, _ []byte) bool { return op != ws.OpClose })
			if stopped || v != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wsLingerConn is a WebSocket connection's socket on the idle loop's path while
// the request goroutine has it. Once a close frame is out (linger), Close leaves
// the socket to lingerClose.
type wsLingerConn struct {
	net.Conn
	linger bool // set before Close, by whoever wrote the close frame
	limit  int  // the largest frame lingerClose parses
}

// SyscallConn is the socket's, for the loop to adopt.
func (c *wsLingerConn) SyscallConn() (syscall.RawConn, error) {
	inner := c.Conn
	if lc, ok := inner.(*limitedConn); ok {
		inner = lc.Conn
	}
	sc, ok := inner.(syscall.Conn)
	if !ok {
		return nil, errors.New("websocket: not a socket")
	}
	return sc.SyscallConn()
}

func (c *wsLingerConn) Close() error {
	if !c.linger {
		return c.Conn.Close()
	}
	go lingerClose(c.Conn, c.limit)
	return nil
}

// beforeBatch ends a kicked connection, writes the answers waiting and reads on
// when the frames waiting to be served have drained.
func (t wsLoopConn) beforeBatch(c *conn) rooms.Reason {
	t.lp.live.Store(c)
	select {
	case <-t.kicked:
		return reasonKicked
	default:
	}
	lp := t.lp
	lp.mu.Lock()
	answers := lp.answers
	lp.answers = nil
	lp.mu.Unlock()
	if len(answers) > 0 {
		hb := make([]byte, 0, 10*len(answers))
		parts := make([][]byte, 0, 2*len(answers))
		for _, a := range answers {
			h := len(hb)
			hb = appendWSFrameHeader(hb, ws.OpText, len(a))
			parts = append(parts, hb[h:], a)
		}
		if err := c.send(parts...); err != nil {
			return rooms.ReasonWriteFailed
		}
	}
	if lp.paused && !lp.full() {
		lp.paused = false
		c.ev.Or(evIn)
		c.p.wake(c)
	}
	return 0
}

// readable parses what the client sent: what the parser kept first, then what the
// socket has, until it has no more or the frames waiting to be served fill the
// queue (reading goes on once they drain: beforeBatch).
func (t wsLoopConn) readable(c *conn) rooms.Reason {
	lp := t.lp
	lp.live.Store(c)
	if lp.paused {
		return 0
	}
	if lp.parser.pending() {
		if reason := t.feed(c, nil); reason != 0 || lp.paused {
			return reason
		}
	}
	buf := c.p.readBuf()
	for range 16 {
		n, err := readNB(c.fd, buf)
		if err != nil {
			return rooms.ReasonClientGone
		}
		if n == 0 {
			return 0
		}
		if reason := t.feed(c, buf[:n]); reason != 0 || lp.paused {
			return reason
		}
		if n < len(buf) {
			return 0
		}
	}
	// A peer that keeps sending gets its turn again after the others.
	c.ev.Or(evIn)
	c.p.wake(c)
	return 0
}

// feed parses data and serves its frames; a violation closes the connection with
// its code.
func (t wsLoopConn) feed(c *conn, data []byte) rooms.Reason {
	lp := t.lp
	var werr error
	stopped, v := lp.parser.feed(data, func(op ws.OpCode, payload []byte) bool {
		t.lastSeen.Store(time.Now().UnixNano())
		switch op {
		case ws.OpPing:
			var hdr [2]byte
			werr = c.send(appendWSFrameHeader(hdr[:0], ws.OpPong, len(payload)), payload)
			return werr == nil && len(c.pend) == 0
		case ws.OpPong:
			return true
		case ws.OpClose:
			lp.peerClosed = true
			werr = c.send(appendWSEcho(payload))
			return false
		}
		if !t.frame(op, payload) {
			return false
		}
		// Reading stops while the answers cannot go out: the socket's buffer, not
		// the connection's, holds what the peer sends meanwhile.
		return !lp.full() && len(c.pend) == 0
	})
	switch {
	case v != nil:
		t.kick(websocket.StatusCode(v.code), v.reason)
		return reasonKicked
	case werr != nil:
		return rooms.ReasonWriteFailed
	case lp.peerClosed:
		lp.parser.release()
		return rooms.ReasonClientGone
	case stopped:
		lp.paused = true
	}
	return 0
}

// frame serves a message after the hello as the library's path does (wsConn.inbound,
// wsConn.serve): on the worker, unless it is a publish, which calls the log, or
// frames wait to be served off the worker already, which it must not pass. It
// reports false when the message closes the connection: the parser stops there.
func (t wsLoopConn) frame(op ws.OpCode, payload []byte) bool {
	lp := t.lp
	in := t.inbound(time.Now(), op == ws.OpText, payload)
	switch {
	case in.code != 0:
		t.kick(in.code, in.why)
		return false
	case in.answer != nil && lp.busy():
		lp.later(func() { t.send(in.answer) })
	case in.answer != nil:
		t.send(in.answer)
	case !in.serve:
	case in.f.Kind == wsPublish || lp.busy():
		lp.later(func() { t.serve(in.f) })
	default:
		t.serve(in.f)
	}
	return true
}
