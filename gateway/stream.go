package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
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

	deadline time.Time // the connection's current write deadline
	last     time.Time // when the last write went out
	credExp  int64     // when the stream's credential expires, Unix seconds; 0: never
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
	// Opening a stream takes more stack than serving it: the opening runs in a frame
	// of its own that is gone before live, so an idle stream's goroutine keeps a
	// small stack (and the runtime, which sizes new goroutines by the average, keeps
	// starting them small).
	o := s.openRoomStream(w, r)
	if o == nil {
		return
	}
	defer o.close()
	s.end(o.sw, o.m, s.live(o.ctx, o.sw, o.m, o.sent))
}

// openedStream is a stream that is open, joined and caught up, ready for live.
type openedStream struct {
	sw      *streamWriter
	m       *rooms.Member
	ctx     context.Context
	sent    replay.Position
	cleanup []func() // run in reverse order when the stream ends
}

func (o *openedStream) close() {
	for i := len(o.cleanup) - 1; i >= 0; i-- {
		o.cleanup[i]()
	}
}

// admittedStream is a stream request that passed its credential check and
// admission: its writer, what releases its place, and who opened it.
type admittedStream struct {
	sw      *streamWriter
	release func()
	who     auth.Principal
}

// admitRoomStream checks the stream's credential for room and admits it. It returns
// nil when the request was answered: refused (401, 403) or turned away (200, a
// longer retry: and the end).
func (s *Server) admitRoomStream(w http.ResponseWriter, r *http.Request, room string) *admittedStream {
	who, aerr, down := s.subscriber(r, room)
	if aerr != nil {
		writeError(w, aerr)
		return nil
	}
	sw := s.openStream(w)
	if down {
		// The credential could not be checked now (a ticket with its store down):
		// the client comes back later, as from any pod that cannot serve it now.
		s.m.streamsClosed.WithLabelValues(rooms.ReasonUnavailable.String()).Inc()
		_ = sw.write(retryFrame(nil, retryMillis(2*s.cfg.RetryMin, 2*s.cfg.RetryMax)))
		return nil
	}
	release, reject := s.admission.admit(r)
	if reject == "" && !s.drain.Accepting() {
		release()
		reject = rejectDraining
	}
	if reject == "" && who.Source == auth.SourceAnonymous {
		if releaseRoom, why := s.sessions.holdAnonymous(s.anonymousAddress(r), room); why == "" {
			releaseAll := release
			release = func() { releaseRoom(); releaseAll() }
		} else {
			release()
			reject = why
		}
	}
	if reject != "" {
		// Draining or over a limit: a longer hint and an ended stream, never a
		// non-200, which would make EventSource give up for good.
		s.m.streamsTurned.WithLabelValues(reject).Inc()
		_ = sw.write(retryFrame(nil, retryMillis(2*s.cfg.RetryMin, 2*s.cfg.RetryMax)))
		return nil
	}
	return &admittedStream{sw: sw, release: release, who: who}
}

// openRoomStream answers the checks of a stream request, admits, joins, anchors and
// replays it. It returns nil when the stream has already ended (refused, turned
// away, failed), having answered and released everything.
func (s *Server) openRoomStream(w http.ResponseWriter, r *http.Request) (opened *openedStream) {
	room := chi.URLParam(r, "room")
	if !replay.ValidRoom(room) {
		writeError(w, errBadRoom)
		return nil
	}
	from, resumed, aerr := resumePoint(r)
	if aerr != nil {
		writeError(w, aerr)
		return nil
	}
	a := s.admitRoomStream(w, r, room)
	if a == nil {
		return nil
	}
	sw, release, who := a.sw, a.release, &a.who
	o := &openedStream{sw: sw, ctx: r.Context(), cleanup: append(make([]func(), 0, 4), release)}
	defer func() {
		if opened == nil {
			o.close()
		}
	}()
	// Join before the first byte goes out: a client that has seen the response
	// start is subscribed, so nothing published after that can pass it by.
	ctx := o.ctx
	m, err := s.rooms.Join(ctx, room)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("stream join failed", "room", room, "err", err)
			s.m.streamsClosed.WithLabelValues(rooms.ReasonUnavailable.String()).Inc()
			_ = sw.write(retryFrame(nil, retryMillis(2*s.cfg.RetryMin, 2*s.cfg.RetryMax)))
		}
		return nil
	}
	o.m = m
	// A stream never outlives its credential: it ends with a reauth when the
	// credential expires or is revoked.
	o.cleanup = append(o.cleanup, func() { s.rooms.Leave(m) }, s.connected(*who, []*rooms.Member{m}))
	if !who.Expires.IsZero() {
		sw.credExp = who.Expires.Unix()
	}
	if !s.drain.Accepting() {
		// The drain began while this stream was joining: it would miss the drain's
		// own close, so it moves on now.
		s.end(sw, m, rooms.ReasonShed)
		return nil
	}
	open := retryFrame(make([]byte, 0, 256+len(room)), retryMillis(s.cfg.RetryMin, s.cfg.RetryMax))
	if !resumed {
		// Anchor the stream at the position the member joined at: every later event
		// reaches it, so a reconnect before the first event resumes from there.
		o.sent = m.Start()
		open = anchorFrame(open, room, o.sent)
	}
	if err := sw.write(open); err != nil {
		s.end(sw, m, reasonFor(ctx, err))
		return nil
	}
	s.countOpened(resumed)
	if resumed {
		if o.sent, err = s.replay(ctx, sw, room, from); err != nil {
			s.end(sw, m, reasonFor(ctx, err))
			return nil
		}
	}
	return o
}

// openStream sets the stream's headers; the first write sends them with status 200.
func (s *Server) openStream(w http.ResponseWriter) *streamWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
}

// replay writes the history after from and returns the position the stream has
// reached. When from cannot be continued it writes a resync (replay.ReadOn decides
// where to) and goes on with whatever history follows the resync point. The room's
// latest events serve it when they hold from (rooms.Registry.Since).
func (s *Server) replay(ctx context.Context, sw *streamWriter, room string, from replay.Position) (replay.Position, error) {
	bp := bufPool.Get().(*[]byte)
	defer putBuf(bp)
	return s.history(ctx, room, from, func(rd rooms.Read) error {
		buf := (*bp)[:0]
		defer func() { *bp = buf[:0] }()
		if rd.Resync {
			buf = append(buf, resyncFrame(room, rd.From, rd.Fork)...)
		}
		n := 0
		for i := range rd.Events {
			buf = append(buf, rd.Frames[i]...)
			n++
			if len(buf) >= batchBytes {
				if err := sw.write(buf); err != nil {
					return err
				}
				s.countDelivered(n)
				buf, n = buf[:0], 0
			}
		}
		if len(buf) > 0 {
			if err := sw.write(buf); err != nil {
				return err
			}
			s.countDelivered(n)
		}
		return nil
	})
}

// history reads the room's history after from, batch by batch, and hands each batch
// to emit, which writes it in its transport's framing: a resync first when
// rd.Resync, then the events. It returns the position the reader has reached. The
// batches follow replay.ReadOn: after a resync, whatever history follows the resync
// point; a bare seq is pinned to the current epoch so that live events are
// deduplicated against it.
func (s *Server) history(ctx context.Context, room string, from replay.Position, emit func(rooms.Read) error) (replay.Position, error) {
	after := from
	for {
		rd, err := s.rooms.Since(ctx, room, after, s.cfg.ReplayBatch)
		if err != nil {
			return after, err
		}
		if rd.Resync {
			s.m.resyncsSent.Inc()
			after = rd.From
		}
		if err := emit(rd); err != nil {
			return after, err
		}
		if n := len(rd.Events); n > 0 {
			after = rd.Events[n-1].Position()
		}
		if after.Epoch == "" {
			after.Epoch = rd.Head.Epoch
		}
		if !rd.More() {
			return after, nil
		}
	}
}

// live serves the member's queue until the stream ends, skipping whatever the
// history already covered. It returns why the stream ended.
func (s *Server) live(ctx context.Context, sw *streamWriter, m *rooms.Member, sent replay.Position) rooms.Reason {
	// A ticker at half the interval, and a heartbeat only when the stream has been
	// quiet for half the interval: no stream is ever silent for a whole interval, and
	// a busy stream pays no timer reset per write.
	quiet := s.cfg.Heartbeat / 2
	hb := time.NewTicker(quiet)
	defer hb.Stop()
	q, room := m.Queue(), m.Room()
	// The client going away closes the member, so the loop below waits on one
	// channel fewer: every select locks each of its channels.
	stop := context.AfterFunc(ctx, func() { m.Close(rooms.ReasonClientGone) })
	defer stop()
	for {
		select {
		case <-m.Done():
			return m.Reason()
		case now := <-hb.C:
			if now.Sub(sw.last) < quiet {
				continue
			}
			if err := sw.write(heartbeatFrame); err != nil {
				return rooms.ReasonWriteFailed
			}
		case it, ok := <-q:
			if !ok {
				q = m.Queue() // the queue grew (see rooms.Member.Queue)
				continue
			}
			// The batch buffer is borrowed only while there is something to write,
			// so an idle stream holds none.
			var b liveBatch
			b.borrow()
			taken := 0
			reread := false
			for {
				if readable(it, sent) {
					reread = true
					taken += m.Charge(it)
					break
				}
				k := b.n
				if b.buf, b.n = s.appendItem(b.buf, b.n, it, room, &sent); b.n != k {
					b.ts = append(b.ts, it.TS())
				}
				taken += m.Charge(it)
				if len(b.buf) >= batchBytes || b.n >= batchItems {
					break
				}
				if it, ok = tryRecv(&q, m); ok {
					continue
				}
				break
			}
			m.ReleaseBytes(taken)
			n := b.n
			var err error
			if len(b.buf) > 0 {
				err = sw.write(b.buf)
			}
			s.settle(&b, err)
			if err != nil {
				return rooms.ReasonWriteFailed
			}
			s.countDelivered(n)
			if reread {
				// The room resynced past history this stream can still read: read
				// it on from the log instead; the queue's copies are then skipped.
				if sent, err = s.replay(ctx, sw, room, sent); err != nil {
					return reasonFor(ctx, err)
				}
			}
		}
	}
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

// readable reports whether it is a resync of the room that the stream need not take:
// the room's lost history begins before what the stream has sent (it read further
// from the log on resume), and the resync is ahead of it, so the log may still hold
// what lies between.
func readable(it *rooms.Item, sent replay.Position) bool {
	return it.Resync && !it.Fork && it.After.Epoch == sent.Epoch && sent.Seq > it.After.Seq &&
		it.Pos.Epoch == sent.Epoch && it.Pos.Seq > sent.Seq
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
}

// stepItem decides what a reader at sent does with it. A live event from an epoch
// other than the one the reader is in is preceded by a resync, so two histories are
// never mixed silently. A resync at or behind what the reader sent in its epoch is
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
	}
	return itemStep{event: true}
}

// appendItem appends it's frame unless the stream already sent that position, as
// stepItem decides.
func (s *Server) appendItem(buf []byte, n int, it *rooms.Item, room string, sent *replay.Position) ([]byte, int) {
	st := stepItem(it, *sent)
	switch {
	case st.skip:
		return buf, n
	case st.fork:
		s.m.resyncsSent.Inc()
		*sent = it.Pos
		return append(buf, ForkFrame(room, it.Pos)...), n
	case st.resync:
		s.m.resyncsSent.Inc()
		buf = append(buf, ResyncFrame(room, st.resyncAt)...)
	case !st.event:
		s.m.resyncsSent.Inc() // a resync notice
	}
	if st.event {
		n++
	}
	*sent = it.Pos
	return append(buf, it.Frame...), n
}

func (s *Server) countDelivered(n int) {
	s.m.delivered.Add(float64(n))
}

// end finishes a stream. A stream moved away by a drain or shed gets a final
// jittered retry hint so that reconnects spread out.
func (s *Server) end(sw *streamWriter, m *rooms.Member, reason rooms.Reason) {
	closed := m.Close(reason)
	if !closed && reason != rooms.ReasonWriteFailed {
		// Closed before (slow consumer, shed, shutdown): that is why it ended. A
		// failed write stays the reason even when the broken connection also
		// cancelled the request.
		reason = m.Reason()
	}
	if reason == rooms.ReasonWriteFailed && (closed || m.Reason() == rooms.ReasonClientGone) {
		// Dropped by the failed write, not before it (the broken connection may
		// have cancelled the request first).
		s.writeDrops.Add(1)
	}
	s.finish(sw, reason, func(exp int64) []byte { return reauthFrame(exp, m.Room()) })
}

// finish counts a stream's end by reason and writes its last words: a final jittered
// retry hint when it was moved away (drain, shed), the reauth notice (reauth builds
// it for the credential's exp) and a retry hint when its credential ended, or a
// dropped connection for a client that could not keep up.
func (s *Server) finish(sw *streamWriter, reason rooms.Reason, reauth func(exp int64) []byte) {
	s.m.streamsClosed.WithLabelValues(reason.String()).Inc()
	switch reason {
	case rooms.ReasonShed, rooms.ReasonShutdown:
		_ = sw.write(retryFrame(nil, retryMillis(s.cfg.RetryMin, s.cfg.RetryMax)))
	case rooms.ReasonReauth:
		exp := sw.credExp
		if exp == 0 || exp > time.Now().Unix() {
			// Revoked before it expired: the credential ends now.
			exp = time.Now().Unix()
		}
		_ = sw.write(retryFrame(reauth(exp), retryMillis(s.cfg.RetryMin, s.cfg.RetryMax)))
	case rooms.ReasonSlowConsumer, rooms.ReasonWriteFailed:
		// Drop the connection rather than end the response cleanly: a client that
		// does not read would otherwise keep the socket as an idle keep-alive
		// connection. The client sees a network error and resumes by id.
		panic(http.ErrAbortHandler)
	}
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
