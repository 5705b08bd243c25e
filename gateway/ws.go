package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// GET /ws: the WebSocket transport, for agents rather than browsers. One connection
// follows several rooms (named in its hello) on the same registry, history and
// drain as SSE streams, and publishes upstream. Its credential is checked before the
// upgrade, as a stream's; its grants per room at the hello. The request goroutine is
// the connection's only writer: it serves the rooms' queues (the members ring one
// bell, as a multiplexed stream's do), the reader's answers and the pings. A second
// goroutine reads: hello, acks, publishes (one at a time, so answers keep their
// order) and pings. See docs for the frames.

// Close codes.
const (
	wsGoingAway      websocket.StatusCode = 1001 // the pod shuts down
	wsServiceRestart websocket.StatusCode = 1012 // drained or shed: reconnect, elsewhere
	wsTryAgainLater  websocket.StatusCode = 1013 // slow consumer, or the pod cannot serve now
	wsBadHello       websocket.StatusCode = 4400
	wsUnauthorized   websocket.StatusCode = 4401
	wsForbidden      websocket.StatusCode = 4403
	wsTimeout        websocket.StatusCode = 4408 // no hello in time, or a silent peer
	wsSuperseded     websocket.StatusCode = 4409
)

// wsOutQueue bounds the answers (published, errors, pongs) waiting for the writer;
// a reader with this many waiting stops reading until the writer catches up.
const wsOutQueue = 64

// wsEnvelopeSlack is what a frame may add to a publish body: the frame's fields, and
// a hello's rooms (64 rooms of 128 characters with their resume ids).
const wsEnvelopeSlack = 16 << 10

// wsConn is one WebSocket connection.
type wsConn struct {
	s       *Server
	c       *websocket.Conn
	cork    *corkConn     // c's connection
	r       *http.Request // the upgrade request, whose credential publishes
	who     auth.Principal
	session string
	since   time.Time
	ctx     context.Context
	cancel  context.CancelFunc

	client, boot string // from the hello; set before the connection is registered
	// claimant is who the connection claims its client as (wsClaimant), identity its
	// Identity; closeAttrs what the close's log line adds (logClose), the writer's.
	claimant   auth.Principal
	identity   string
	closeAttrs []any

	helloCh  chan wsFrame
	welcomed chan struct{} // closed once the welcome is out: the reader goes on
	readDone chan struct{}
	out      chan []byte
	bell     chan struct{}

	kicked     chan struct{}
	kickOnce   sync.Once
	kickCode   websocket.StatusCode
	kickReason string

	lastSeen atomic.Int64 // Unix nanoseconds of the last frame or pong from the peer
	pinging  atomic.Bool
	pings    sync.WaitGroup

	rooms    []wsRoom // the writer's
	releases []func() // the anonymous cap's rooms it holds
	batch    liveBatch
	ends     []int // where each frame of the batch ends in batch.buf

	mu    sync.Mutex
	state map[string]*wsRoomState
}

// wsRoom is one room of a connection, as the writer sees it.
type wsRoom struct {
	liveRoom
	st      *wsRoomState
	batched int // the events of the live batch being gathered
}

// wsRoomState is what a connection delivered and had acknowledged in one room,
// guarded by wsConn.mu.
type wsRoomState struct {
	sent replay.Position
	// before is where the connection stood in the epoch it left at its last
	// resync: an ack of it may still arrive.
	before  replay.Position
	ack     replay.Position
	acked   bool
	unacked int64
}

// advance records that the connection sent up to pos.
func (st *wsRoomState) advance(pos replay.Position) {
	if pos.Epoch != st.sent.Epoch {
		st.before = st.sent
	}
	st.sent = pos
}

// kick asks the writer to close the connection with code; the first call counts.
func (wc *wsConn) kick(code websocket.StatusCode, reason string) {
	wc.kickOnce.Do(func() {
		wc.kickCode, wc.kickReason = code, reason
		close(wc.kicked)
	})
}

// send queues an answer for the writer, in order; false when the connection ended.
func (wc *wsConn) send(b []byte) bool {
	select {
	case wc.out <- b:
		return true
	case <-wc.ctx.Done():
		return false
	case <-wc.kicked:
		return false
	}
}

func newSession() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

var errUpgradeRequired = newError(http.StatusUpgradeRequired, "upgrade_required",
	"GET /ws is a WebSocket endpoint: send Connection: Upgrade and Upgrade: websocket")

// isUpgrade reports whether r asks for a WebSocket handshake; Accept checks the
// rest of it.
func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	if !isUpgrade(r) {
		// Before the credential: a request that cannot upgrade must not redeem a
		// ticket.
		w.Header().Set("Upgrade", "websocket")
		writeError(w, errUpgradeRequired)
		return
	}
	if aerr := s.wsOrigin(r); aerr != nil {
		writeError(w, aerr)
		return
	}
	// The credential is checked before the upgrade, so that a refusal is a plain
	// answer; its grants are checked per room at the hello.
	who, aerr, down := s.subscriber(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if down {
		s.m.streamsClosed.WithLabelValues(rooms.ReasonUnavailable.String()).Inc()
		writeError(w, unavailable("the credential could not be checked now; retry later"))
		return
	}
	if who.Source == auth.SourceCookie && !s.wsTrustedOrigin(r) {
		// A page on another origin must not ride on the cookie the browser attaches
		// by itself (cross-site WebSocket hijacking).
		s.edgeM.crossOrigin.Inc()
		writeError(w, errCrossOrigin)
		return
	}
	release, reject := s.admission.admit(r)
	if reject == "" && !s.drain.Accepting() {
		release()
		reject = rejectDraining
	}
	if reject != "" {
		s.m.streamsTurned.WithLabelValues(reject).Inc()
		writeError(w, unavailable("the pod cannot take this connection now; retry, another pod may"))
		return
	}
	defer release()

	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	wc := &wsConn{s: s, r: r, who: who, session: newSession(), since: time.Now(), ctx: ctx, cancel: cancel,
		claimant: s.wsClaimant(r, who), helloCh: make(chan wsFrame, 1), welcomed: make(chan struct{}), readDone: make(chan struct{}),
		out: make(chan []byte, wsOutQueue), bell: make(chan struct{}, 1), kicked: make(chan struct{}),
		state: map[string]*wsRoomState{}}
	wc.identity = wc.claimant.Identity()
	wc.lastSeen.Store(time.Now().UnixNano())
	opts := &websocket.AcceptOptions{
		OriginPatterns: s.cfg.AllowOrigins,
		OnPongReceived: func(context.Context, []byte) { wc.lastSeen.Store(time.Now().UnixNano()) },
	}
	if len(s.cfg.AllowOrigins) == 1 && s.cfg.AllowOrigins[0] == "*" {
		opts.OriginPatterns, opts.InsecureSkipVerify = nil, true
	}
	cw := &corkWriter{ResponseWriter: w, timeout: s.cfg.WriteTimeout}
	c, err := websocket.Accept(cw, r, opts)
	if err != nil {
		// Accept answered the request (not a WebSocket handshake).
		return
	}
	wc.c, wc.cork = c, cw.conn
	c.SetReadLimit(s.cfg.MaxBody + wsEnvelopeSlack)
	s.wsOpen.Add(1)
	defer s.wsOpen.Add(-1)
	go wc.read()
	code, reason := wc.run()
	wc.finish(code, reason)
}

// finish closes the connection with code (none: the peer is gone or the socket
// broke) and waits for its goroutines.
func (wc *wsConn) finish(code websocket.StatusCode, reason string) {
	wc.s.wsClosed.WithLabelValues(closeLabel(code)).Inc()
	wc.logClose(code, reason)
	if code == 0 {
		_ = wc.c.CloseNow()
	} else {
		if len(reason) > 123 {
			reason = reason[:123]
		}
		_ = wc.c.Close(code, reason)
	}
	wc.cancel()
	<-wc.readDone
	wc.pings.Wait()
}

func closeLabel(code websocket.StatusCode) string {
	if code == 0 {
		return "none"
	}
	return strconv.Itoa(int(code))
}

// wsOrigin refuses a browser's upgrade from an origin that is neither the gateway's
// own nor an allowed one (--allow-origin), with the JSON answer; Accept checks the
// same again.
func (s *Server) wsOrigin(r *http.Request) *apiError {
	origin := r.Header.Get("Origin")
	if origin == "" || sameHost(r, origin) {
		return nil
	}
	if len(s.cfg.AllowOrigins) == 1 && s.cfg.AllowOrigins[0] == "*" {
		return nil
	}
	for _, o := range s.cfg.AllowOrigins {
		if strings.EqualFold(o, origin) {
			return nil
		}
	}
	return newError(http.StatusForbidden, "forbidden_origin", "WebSocket connections from this origin are not allowed (--allow-origin)")
}

// wsTrustedOrigin reports whether a request may use the browser's cookie: no Origin
// (not a browser page), the gateway's own, or a listed origin in credentials mode.
func (s *Server) wsTrustedOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || sameHost(r, origin) {
		return true
	}
	for _, o := range s.trustedOrigins() {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// sameHost reports whether origin is the gateway's own: the request's scheme
// (requestScheme) and host. A page on https://host is not the origin of a plain
// http://host connection, nor the other way round.
func sameHost(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Scheme, requestScheme(r)) && strings.EqualFold(u.Host, r.Host)
}

// run serves the connection: the hello, the welcome and replay, then live. It
// returns the close code and reason.
func (wc *wsConn) run() (websocket.StatusCode, string) {
	s := wc.s
	timer := time.NewTimer(s.cfg.WSHelloTimeout)
	defer timer.Stop()
	if s.wsBeforeHello != nil {
		s.wsBeforeHello(wc.readDone)
	}
	var f wsFrame
	select {
	case f = <-wc.helloCh:
	case <-timer.C:
		return wsTimeout, "no hello within " + s.cfg.WSHelloTimeout.String()
	case <-wc.kicked:
		return wc.kickCode, wc.kickReason
	case <-wc.readDone:
		// The reader kicks before it ends when the hello was bad: that code wins.
		select {
		case <-wc.kicked:
			return wc.kickCode, wc.kickReason
		default:
			return 0, ""
		}
	}
	if replay.ValidClient(f.Client) {
		wc.client = f.Client // for the close's log line, even when the hello is bad
	}
	h, err := parseHello(f, s.cfg.MaxRoomsPerStream, time.Now().Add(wsBootSkew))
	if err != nil {
		return wsBadHello, "bad hello: " + err.Error()
	}
	wc.client, wc.boot = h.client, h.boot
	if code, reason := wc.checkClient(); code != 0 {
		return code, reason
	}
	if code, reason := wc.checkGrants(h.names); code != 0 {
		return code, reason
	}
	if code, reason := wc.claim(); code != 0 {
		return code, reason
	}
	defer wc.unregister()
	defer func() {
		for _, release := range wc.releases {
			release()
		}
	}()
	if code, reason := wc.join(h); code != 0 {
		return code, reason
	}
	defer func() {
		for i := range wc.rooms {
			s.rooms.Leave(wc.rooms[i].m)
		}
	}()
	members := make([]*rooms.Member, len(wc.rooms))
	for i := range wc.rooms {
		members[i] = wc.rooms[i].m
	}
	defer s.connected(wc.who, members)()
	s.wsMembers.Add(int64(len(wc.rooms)))
	defer s.wsMembers.Add(-int64(len(wc.rooms)))
	if !s.drain.Accepting() {
		// The drain began while this connection was joining: it would miss the
		// drain's own close.
		return wc.end(rooms.ReasonShed)
	}
	welcome := wsWelcomeFrame{V: wsVersion, Kind: wsWelcome, Session: wc.session, Rooms: make(map[string]string, len(wc.rooms))}
	wc.mu.Lock()
	for i := range wc.rooms {
		r := &wc.rooms[i]
		if h.resumed[i] {
			r.sent = h.from[i]
		} else {
			r.sent = r.m.Start()
		}
		welcome.Rooms[r.name] = r.sent.String()
		r.st = &wsRoomState{sent: r.sent}
		wc.state[r.name] = r.st
	}
	wc.mu.Unlock()
	if err := wc.write(wsJSON(welcome)); err != nil {
		return wc.end(reasonFor(wc.ctx, err))
	}
	close(wc.welcomed)
	// One connection is one connect, resumed when any of its rooms resumes, as a
	// multiplexed SSE stream counts.
	s.countOpened(slices.Contains(h.resumed, true))
	for i := range wc.rooms {
		if !h.resumed[i] {
			continue
		}
		if err := wc.replay(i); err != nil {
			return wc.end(reasonFor(wc.ctx, err))
		}
	}
	return wc.end(wc.live())
}

// checkGrants applies the credential's grants to the hello's rooms: an error frame
// naming the first room not granted, and its close code.
func (wc *wsConn) checkGrants(names []string) (websocket.StatusCode, string) {
	for _, room := range names {
		switch {
		case wc.who.CanSubscribe(room):
			continue
		case wc.who.Source == auth.SourceAnonymous:
			wc.s.refuse("subscribe", "credential")
			_ = wc.write(wsErrorOf("", room, errNoCredential))
			return wsUnauthorized, "unauthorized: room " + room
		default:
			wc.s.refuse("subscribe", "grant")
			_ = wc.write(wsErrorOf("", room, errNotGranted("subscribing to", room)))
			return wsForbidden, "forbidden: room " + room
		}
	}
	return 0, ""
}

// join makes the connection a member of each room, holding the anonymous cap's
// rooms when it has no credential.
func (wc *wsConn) join(h hello) (websocket.StatusCode, string) {
	s := wc.s
	if wc.who.Source == auth.SourceAnonymous {
		releaseRooms, why := s.sessions.holdAnonymous(s.anonymousAddress(wc.r), h.names...)
		switch why {
		case rejectAnonymousRooms:
			s.m.streamsTurned.WithLabelValues(why).Inc()
			return wsTryAgainLater, "the pod holds as many rooms for anonymous clients as it may"
		case rejectAnonymousRoomsIP:
			s.m.streamsTurned.WithLabelValues(why).Inc()
			return wsTryAgainLater, "this address holds as many rooms for anonymous clients as it may"
		}
		wc.releases = append(wc.releases, releaseRooms)
	}
	wc.rooms = make([]wsRoom, 0, len(h.names))
	for _, name := range h.names {
		m, err := s.rooms.JoinBell(wc.ctx, name, wc.bell)
		if err != nil {
			for i := range wc.rooms {
				s.rooms.Leave(wc.rooms[i].m)
			}
			wc.rooms = nil
			s.cfg.Logger.Warn("websocket join failed", "room", name, "err", err)
			return wsTryAgainLater, "room " + name + " is unavailable now"
		}
		wc.rooms = append(wc.rooms, wsRoom{liveRoom: liveRoom{name: name, m: m, q: m.Queue()}})
	}
	return 0, ""
}

// write sends one frame. The connection bounds the write by the write timeout (see
// corkConn), so the library gets a context without a deadline and sets no timer.
func (wc *wsConn) write(p []byte) error {
	return wc.c.Write(context.Background(), websocket.MessageText, p)
}

// writeAll sends frames (msgs[i] is buf[ends[i-1]:ends[i]]); several go out in one
// write (see corkConn).
func (wc *wsConn) writeAll(buf []byte, ends []int) error {
	if len(ends) == 0 {
		return nil
	}
	if len(ends) == 1 {
		return wc.write(buf[:ends[0]])
	}
	wc.cork.cork()
	if wc.s.wsCorkedHook != nil {
		wc.s.wsCorkedHook(wc.client)
	}
	var err error
	start := 0
	for _, end := range ends {
		if err = wc.write(buf[start:end]); err != nil {
			break
		}
		start = end
	}
	if uerr := wc.cork.uncork(); err == nil {
		err = uerr
	}
	return err
}

// replay writes room i's history after its sent position, as a stream's replay
// does, in event frames.
func (wc *wsConn) replay(i int) error {
	s, r := wc.s, &wc.rooms[i]
	bp := bufPool.Get().(*[]byte)
	defer putBuf(bp)
	var ends []int
	sent, err := s.history(wc.ctx, r.name, r.sent, func(rd rooms.Read) error {
		buf := (*bp)[:0]
		defer func() { *bp = buf[:0] }()
		ends = ends[:0]
		if rd.Resync {
			buf = appendWSResync(buf, r.name, rd.From, rd.Fork)
			ends = append(ends, len(buf))
		}
		var ev []byte
		for _, e := range rd.Events {
			ev = e.AppendJSON(ev[:0])
			buf = appendWSEvent(buf, e.Position(), ev)
			ends = append(ends, len(buf))
		}
		// Recorded before the write, as a live batch is (an ack may come first).
		if n := len(rd.Events); n > 0 {
			wc.delivered(r, rd.Events[n-1].Position(), n)
		} else if rd.Resync {
			wc.delivered(r, rd.From, 0)
		}
		if err := wc.writeAll(buf, ends); err != nil {
			return err
		}
		s.countDelivered(len(rd.Events))
		return nil
	})
	r.sent = sent
	wc.mu.Lock()
	r.st.advance(sent)
	wc.mu.Unlock()
	return err
}

// delivered records that the connection sent room r up to pos, n events more.
func (wc *wsConn) delivered(r *wsRoom, pos replay.Position, n int) {
	wc.mu.Lock()
	r.st.advance(pos)
	r.st.unacked += int64(n)
	wc.mu.Unlock()
}

// readyNow is always ready to receive from: closed.
var readyNow = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// live serves the rooms' queues (a batch at a time, round-robin over the rooms: see
// roundRobin), the reader's answers, pings and the owner's refresh until the
// connection ends, and returns why.
func (wc *wsConn) live() rooms.Reason {
	s := wc.s
	ping := time.NewTicker(s.cfg.WSPing)
	defer ping.Stop()
	refresh := time.NewTicker(s.cfg.OwnerTTL / 3)
	defer refresh.Stop()
	rr := newRoundRobin(len(wc.rooms))
	more := true // items may have been queued before the bell was set
	for {
		// While the queues hold more, the next batch is ready at once, but answers,
		// closes, pings and refreshes still get their turn: a busy room cannot
		// starve them.
		wake := wc.bell
		if more {
			wake = readyNow
		}
		select {
		case <-wake:
		case b := <-wc.out:
			if err := wc.write(b); err != nil {
				return reasonFor(wc.ctx, err)
			}
			continue
		case <-wc.kicked:
			return 0
		case <-wc.readDone:
			return rooms.ReasonClientGone
		case now := <-ping.C:
			if now.Sub(time.Unix(0, wc.lastSeen.Load())) > 3*s.cfg.WSPing {
				wc.kick(wsTimeout, "no frame or pong for three ping intervals")
				return 0
			}
			wc.ping()
			continue
		case <-refresh.C:
			if !wc.refresh() {
				return 0
			}
			continue
		}
		for i := range wc.rooms {
			if reason := wc.rooms[i].m.Reason(); reason != 0 {
				return reason
			}
		}
		if s.wsBatchHook != nil {
			s.wsBatchHook(wc.client)
		}
		wc.batch.borrow()
		wc.ends = wc.ends[:0]
		more = rr.gather(wc)
		// The batch counts as delivered before it is written: a client may ack an
		// event as soon as it reads it, before the write returns here.
		wc.mu.Lock()
		for i := range wc.rooms {
			r := &wc.rooms[i]
			r.st.advance(r.sent)
			r.st.unacked += int64(r.batched)
			r.batched = 0
		}
		wc.mu.Unlock()
		err := wc.writeAll(wc.batch.buf, wc.ends)
		total := wc.batch.n
		s.settle(&wc.batch, err)
		if err != nil {
			return rooms.ReasonWriteFailed
		}
		if s.wsWroteHook != nil && total > 0 {
			s.wsWroteHook(wc.client)
		}
		s.countDelivered(total)
		for _, i := range rr.reread {
			// The room resynced past history this connection can still read: read
			// it on from the log; the queue's copies are then skipped.
			if err := wc.replay(i); err != nil {
				return reasonFor(wc.ctx, err)
			}
			more = true
		}
	}
}

// room, full and add gather the connection's live batches (see roundRobin).
func (wc *wsConn) room(i int) *liveRoom { return &wc.rooms[i].liveRoom }

func (wc *wsConn) full() bool { return len(wc.batch.buf) >= batchBytes }

func (wc *wsConn) add(i int, it *rooms.Item) {
	b, r := &wc.batch, &wc.rooms[i]
	var n int
	if b.buf, wc.ends, n = wc.appendItem(b.buf, wc.ends, r, it); n > 0 {
		b.ts = append(b.ts, it.TS())
	}
	b.n += n
	r.batched += n
}

// appendItem appends the frames of one live item, as stepItem decides, and reports
// how many events it added.
func (wc *wsConn) appendItem(buf []byte, ends []int, r *wsRoom, it *rooms.Item) ([]byte, []int, int) {
	st := stepItem(it, r.sent)
	switch {
	case st.skip:
		return buf, ends, 0
	case st.fork:
		wc.s.m.resyncsSent.Inc()
		r.sent = it.Pos
		buf = appendWSResync(buf, r.name, it.Pos, true)
		return buf, append(ends, len(buf)), 0
	case st.resync:
		wc.s.m.resyncsSent.Inc()
		buf = appendWSResync(buf, r.name, st.resyncAt, false)
		ends = append(ends, len(buf))
	case !st.event:
		wc.s.m.resyncsSent.Inc()
		r.sent = it.Pos
		buf = appendWSResync(buf, r.name, it.Pos, false)
		return buf, append(ends, len(buf)), 0
	}
	env := sseData(it.Frame)
	if len(env) == 0 || env[0] != '{' {
		return buf, ends, 0
	}
	r.sent = it.Pos
	buf = appendWSEvent(buf, it.Pos, env)
	return buf, append(ends, len(buf)), 1
}

// ping sends a ping, unless one is still waiting for its pong; the pong moves
// lastSeen.
func (wc *wsConn) ping() {
	if wc.pinging.Swap(true) {
		return
	}
	wc.pings.Add(1)
	go func() {
		defer wc.pings.Done()
		defer wc.pinging.Store(false)
		ctx, cancel := context.WithTimeout(wc.ctx, wc.s.cfg.WSPing)
		defer cancel()
		_ = wc.c.Ping(ctx)
	}()
}

// end closes every member with reason (unless one was closed first, which then
// says why) and maps it to the close code: a kick's code wins.
func (wc *wsConn) end(reason rooms.Reason) (websocket.StatusCode, string) {
	select {
	case <-wc.kicked:
		for i := range wc.rooms {
			wc.rooms[i].m.Close(rooms.ReasonClientGone)
		}
		return wc.kickCode, wc.kickReason
	default:
	}
	if reason != rooms.ReasonWriteFailed {
		for i := range wc.rooms {
			if r := wc.rooms[i].m.Reason(); r != 0 {
				reason = r
				break
			}
		}
	}
	wc.s.closeAll(reason, len(wc.rooms), func(i int) *rooms.Member { return wc.rooms[i].m })
	wc.s.m.streamsClosed.WithLabelValues(reason.String()).Inc()
	switch reason {
	case rooms.ReasonShed:
		return wsServiceRestart, "the pod is draining: reconnect and resume"
	case rooms.ReasonShutdown:
		return wsGoingAway, "the pod is shutting down: reconnect and resume"
	case rooms.ReasonSlowConsumer:
		return wsTryAgainLater, "slow consumer: reconnect and resume from the last id"
	case rooms.ReasonUnavailable:
		return wsTryAgainLater, "the event log is unavailable: reconnect later"
	case rooms.ReasonReauth:
		return wsUnauthorized, "the credential expired or was revoked"
	}
	return 0, ""
}
