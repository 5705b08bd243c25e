package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/wire"
	"github.com/roomcast/roomcast/rooms"
)

// Bounds of one write batch: a stream writes whatever its queue holds, up to these,
// then flushes once.
const (
	batchItems = 128
	batchBytes = 64 << 10
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledBuf is the largest batch buffer kept for reuse, in bytes. A batch stops
// growing at batchBytes, but its last frame may take it further; a buffer grown past
// this bound is left to the garbage collector, so the pool never keeps the largest
// batch ever written for every stream to borrow.
const maxPooledBuf = 4 * batchBytes

// putBuf returns a batch buffer to bufPool unless it grew past maxPooledBuf.
func putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		return
	}
	bufPool.Put(bp)
}

// streamWriter writes frames to one stream with a deadline per write.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration

	deadline  time.Time     // the connection's current write deadline
	last      time.Time     // when the last write went out
	credExp   int64         // when the stream's credential expires, Unix seconds; 0: never
	heartbeat time.Duration // the longest a stream stays silent
}

// write sends p and flushes it. Every write has a deadline between 3/4 of the write
// timeout and the whole of it: the deadline is moved only when less than 3/4 of it
// is left, which spares a deadline update per batch on a busy stream.
func (sw *streamWriter) write(p []byte) error {
	now := time.Now()
	if sw.deadline.Sub(now) < sw.timeout*3/4 {
		sw.deadline = now.Add(sw.timeout)
		if err := sw.rc.SetWriteDeadline(sw.deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
	}
	if _, err := sw.w.Write(p); err != nil {
		return err
	}
	sw.last = now
	return sw.rc.Flush()
}

// resumePoint reads the Last-Event-ID header, else the lastEventId query parameter.
// The header wins: a browser sends it on automatic reconnects, while the query
// parameter of a recreated EventSource may be stale.
func resumePoint(r *http.Request) (replay.Position, bool, *apiError) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return replay.Position{}, false, nil
	}
	pos, err := replay.ParsePosition(v)
	if err != nil {
		return replay.Position{}, false, errBadLastEventID
	}
	return pos, true, nil
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	room := chi.URLParam(r, "room")
	if !replay.ValidRoom(room) {
		writeError(w, errBadRoom)
		return
	}
	from, resumed, aerr := resumePoint(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.serveStream(w, r, kindStream, []string{room}, []replay.Position{from}, []bool{resumed})
}

// serveStream serves an SSE stream of names (one room, or a multiplexed stream's
// rooms) resuming from from where resumed says: it checks the credential, admits
// the stream, joins its rooms before the first byte goes out (a client that has seen
// the response start is subscribed, so nothing published after that can pass it by)
// and serves it until it ends.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, kind connKind, names []string, from []replay.Position, resumed []bool) {
	a := s.admitStream(w, r, names...)
	if a == nil {
		return
	}
	t := &sseStream{sw: a.sw}
	c := s.newConn(r.Context(), kind, t, len(names))
	c.deferEnd(a.release)
	defer c.runCleanup()
	if kind == kindMux {
		c.token = replay.AppendTokenHead(nil, names)
	}
	if err := c.join(names); err != nil {
		if c.ctx.Err() == nil {
			s.cfg.Logger.Warn("stream join failed", "rooms", names, "err", err)
			s.m.streamsClosed.WithLabelValues(rooms.ReasonUnavailable.String()).Inc()
			var why []byte
			if errors.Is(err, replay.ErrUnavailable) {
				why = s.appendUnreachable(nil)
			}
			a.sw.turnAway(s, why)
		}
		return
	}
	c.deferEnd(c.leave)
	if !a.who.Expires.IsZero() {
		a.sw.credExp = a.who.Expires.Unix()
	}
	if s.loop != nil && r.Method == http.MethodGet && r.ProtoMajor == 1 && r.ProtoMinor >= 1 && r.TLS == nil {
		// An HTTP/1.1 answer to a GET is chunked: on the loop the stream goes on
		// writing chunks (see sseStream.write). HTTP/2 cannot be hijacked, and a
		// HEAD has no body to go on with.
		c.loopable = true
		// The loop closes the connection when the stream ends (its socket is
		// the loop's alone by then): a keep-alive client, a proxy's upstream
		// pool, must not take it for reuse.
		w.Header().Set("Connection", "close")
		c.hijack = func() (net.Conn, error) {
			if err := a.sw.rc.Flush(); err != nil {
				return nil, err
			}
			nc, rw, err := a.sw.rc.Hijack()
			if err != nil {
				return nil, err
			}
			// Whatever the client sent after its request is dropped, as it would
			// be on the loop (readSocket).
			_, _ = rw.Reader.Discard(rw.Reader.Buffered())
			a.sw.w, a.sw.rc = nil, nil
			return nc, nil
		}
	}
	c.serve(a.who, from, resumed)
}

// admittedStream is a stream request that passed its credential check and
// admission: its writer, what releases its place, and who opened it.
type admittedStream struct {
	sw      *streamWriter
	release func()
	who     auth.Principal
}

// admitStream checks the stream's credential for its rooms and admits it: one
// stream is one admission, whatever its rooms. It returns nil when the request was
// answered: refused (401, 403) or turned away (200, a longer retry: and the end).
func (s *Server) admitStream(w http.ResponseWriter, r *http.Request, names ...string) *admittedStream {
	who, aerr, down := s.subscriber(r, names...)
	if aerr != nil {
		writeError(w, aerr)
		return nil
	}
	sw := s.openStream(w)
	if down {
		// The credential could not be checked now (a ticket with its store down):
		// the client comes back later, as from any pod that cannot serve it now.
		s.m.streamsClosed.WithLabelValues(rooms.ReasonUnavailable.String()).Inc()
		sw.turnAway(s, credentialUnchecked)
		return nil
	}
	release, reject := s.admission.admit(r)
	if reject == "" && !s.drain.Accepting() {
		release()
		reject = rejectDraining
	}
	if reject == "" {
		release, reject = s.admitUser(who, release)
	}
	if reject == "" && who.Source == auth.SourceAnonymous {
		// The anonymous cap and quota count rooms: each room of the stream holds one.
		if releaseRooms, why := s.sessions.holdAnonymous(s.anonymousAddress(r), names...); why == "" {
			releaseAll := release
			release = func() { releaseRooms(); releaseAll() }
		} else {
			release()
			reject = why
		}
	}
	if reject != "" {
		// Draining or over a limit: a longer hint and an ended stream, never a
		// non-200, which would make EventSource give up for good.
		s.m.streamsTurned.WithLabelValues(reject).Inc()
		sw.turnAway(s, nil)
		return nil
	}
	return &admittedStream{sw: sw, release: release, who: who}
}

// turnAway ends a stream the pod cannot serve now with a longer jittered retry
// hint, after why (comment lines saying why, or nil): the client comes back later,
// to this pod or another.
func (sw *streamWriter) turnAway(s *Server, why []byte) {
	_ = sw.write(retryFrame(why, retryMillis(2*s.cfg.RetryMin, 2*s.cfg.RetryMax)))
}

// credentialUnchecked is the comment line of a stream turned away because its
// credential could not be checked (a ticket with its store unreachable).
var credentialUnchecked = []byte(": the credential cannot be checked now (its store is unreachable); retry in a few seconds\n")

// appendUnreachable appends the comment line of a stream that ends because the event
// log cannot be reached, naming the log's backend and address (never a credential):
// a person reading the stream (curl, roomcastctl tail) learns why it ended, and
// EventSource ignores it.
func (s *Server) appendUnreachable(dst []byte) []byte {
	dst = append(dst, ": the event log ("...)
	dst = append(dst, s.logName()...)
	return append(dst, ") is unreachable; retry in a few seconds\n"...)
}

// openStream sets the stream's headers; the first write sends them with status 200.
func (s *Server) openStream(w http.ResponseWriter) *streamWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout, heartbeat: s.cfg.Heartbeat}
}

// sseFraming is an event's SSE frame without its id line (wire.EventFields),
// encoded once per event and shared by every stream, which writes its own id line
// before it.
var sseFraming = &rooms.Framing{Slot: 0, Encode: wire.EventFields}

// sseStream is the SSE transport, of a single-room stream (each frame's id is the
// room's position) or a multiplexed one (each frame's id is the resume token of every
// room's position, conn.token and each room's tok).
type sseStream struct {
	sw *streamWriter
}

// appendID appends the id line of a frame of room i, whose sent position is set.
func (t *sseStream) appendID(dst []byte, c *conn, i int) []byte {
	if c.token == nil {
		return wire.AppendID(dst, c.rooms[i].sent)
	}
	dst = append(dst, "id: "...)
	dst = append(dst, c.token...)
	for j := range c.rooms {
		dst = append(dst, c.rooms[j].tok...)
	}
	return append(dst, '\n')
}

// open writes the reconnect hint and the anchor: a single-room stream opened
// without a resume point anchors at the position its member joined at, so that a
// reconnect before the first event resumes from there; a multiplexed stream always
// anchors, at the token of every room's starting point (filling in the rooms its
// token did not hold).
func (t *sseStream) open(c *conn, resumed []bool) error {
	s := c.s
	open := retryFrame(make([]byte, 0, 256+len(c.token)+96*len(c.rooms)), retryMillis(s.cfg.RetryMin, s.cfg.RetryMax))
	switch {
	case c.token != nil:
		open = t.appendMuxAnchor(open, c)
	case !resumed[0]:
		open = anchorFrame(open, c.rooms[0].name, c.rooms[0].sent)
	}
	return t.sw.write(open)
}

func (t *sseStream) appendEvent(dst []byte, c *conn, i int, it *rooms.Item) []byte {
	return append(t.appendID(dst, c, i), it.Encoded(sseFraming)...)
}

func (t *sseStream) appendResync(dst []byte, c *conn, i int, head replay.Position, fork bool) []byte {
	return appendResyncFields(t.appendID(dst, c, i), c.rooms[i].name, head, fork)
}

func (t *sseStream) record(*conn) {}

// write sends a batch of frames: through net/http while the stream has its
// request goroutine, as one chunk of the chunked response once it is on the loop.
func (t *sseStream) write(c *conn, buf []byte, _ []int) error {
	if !c.onLoop {
		return t.sw.write(buf)
	}
	var hdr [18]byte
	return c.send(appendChunkHeader(hdr[:0], len(buf)), buf, crlf)
}

var (
	crlf     = []byte("\r\n")
	chunkEnd = []byte("0\r\n\r\n")
)

// appendChunkHeader appends the header of a chunk of n bytes: its size in hex and
// CRLF.
func appendChunkHeader(dst []byte, n int) []byte {
	dst = strconv.AppendInt(dst, int64(n), 16)
	return append(dst, '\r', '\n')
}

// interval is half the heartbeat interval, and tick sends a heartbeat only when the
// stream has been quiet for that long: no stream is ever silent for a whole interval,
// and a busy stream pays no timer reset per write.
func (t *sseStream) interval() time.Duration { return t.sw.heartbeat / 2 }

func (t *sseStream) tick(c *conn, now time.Time) rooms.Reason {
	last := t.sw.last
	if c.onLoop {
		last = time.Unix(0, c.lastWrite)
	}
	if now.Sub(last) < t.sw.heartbeat/2 {
		return 0
	}
	if err := t.write(c, heartbeatFrame, nil); err != nil {
		return rooms.ReasonWriteFailed
	}
	return 0
}

// end writes a stream's last words: a final jittered retry hint when it was moved
// away (drain, shed), the reauth notice naming its rooms and a retry hint when its
// credential ended, a comment naming the unreachable event log and a longer retry
// hint when the log failed it, or a dropped connection for a client that could not
// keep up.
func (t *sseStream) end(c *conn, reason rooms.Reason) {
	s, sw := c.s, t.sw
	var last []byte
	switch reason {
	case rooms.ReasonShed, rooms.ReasonShutdown:
		last = retryFrame(nil, retryMillis(s.cfg.RetryMin, s.cfg.RetryMax))
	case rooms.ReasonReauth:
		exp := sw.credExp
		if exp == 0 || exp > time.Now().Unix() {
			// Revoked before it expired: the credential ends now.
			exp = time.Now().Unix()
		}
		names := make([]string, len(c.rooms))
		for i := range c.rooms {
			names[i] = c.rooms[i].name
		}
		last = retryFrame(reauthFrame(exp, names...), retryMillis(s.cfg.RetryMin, s.cfg.RetryMax))
	case rooms.ReasonUnavailable:
		last = retryFrame(s.appendUnreachable(nil), retryMillis(2*s.cfg.RetryMin, 2*s.cfg.RetryMax))
	case rooms.ReasonSlowConsumer, rooms.ReasonWriteFailed:
		// Drop the connection rather than end the response cleanly: a client that
		// does not read would otherwise keep the socket as an idle keep-alive
		// connection. The client sees a network error and resumes by id. On the
		// loop, the worker closes the socket (finish).
		if !c.onLoop {
			panic(http.ErrAbortHandler)
		}
		c.abort = true
		return
	}
	if !c.onLoop {
		if last != nil {
			_ = sw.write(last)
		}
		return
	}
	// On the loop the response ends here, and its connection with it.
	if last != nil {
		_ = t.write(c, last, nil)
	}
	_ = c.send(chunkEnd)
}

func reasonFor(ctx context.Context, err error) rooms.Reason {
	if ctx.Err() != nil {
		return rooms.ReasonClientGone
	}
	if errors.Is(err, replay.ErrUnavailable) || errors.Is(err, replay.ErrClosed) {
		return rooms.ReasonUnavailable
	}
	return rooms.ReasonWriteFailed
}
