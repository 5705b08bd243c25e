package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
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
	s    *Server
	c    *websocket.Conn
	cork *corkConn     // c's connection
	r    *http.Request // the upgrade request, whose credential publishes; nil on the loop
	// On the loop, what publishes read of the upgrade request (publishRequest).
	authz   []string
	remote  string
	who     auth.Principal
	session string
	since   time.Time
	ctx     context.Context
	cancel  context.CancelFunc

	client, boot string // from the hello; set before the connection is registered
	agent        string // the hello's agent (the client's version), "" when none
	rate         wsBucket
	// claimant is who the connection claims its client as (wsClaimant), identity its
	// Identity; closeAttrs what the close's log line adds (logClose), the writer's.
	claimant   *auth.Principal // nil: who
	identity   string
	closeAttrs []any

	helloCh  chan wsFrame
	welcomed chan struct{} // closed once the welcome is out: the reader goes on
	readDone chan struct{}
	out      chan []byte

	kicked     chan struct{}
	kickOnce   sync.Once
	kickCode   websocket.StatusCode
	kickReason string

	lastSeen atomic.Int64 // Unix nanoseconds of the last frame or pong from the peer
	pinging  atomic.Bool
	pings    sync.WaitGroup

	lp *wsLoopSide // on the idle loop's path (see wsloop.go); nil on the library's

	conn     *conn    // the delivery core; the connection is its transport
	releases []func() // the anonymous cap's rooms it holds
	// code and why are how the connection closes, as its end decided.
	code websocket.StatusCode
	why  string

	mu sync.Mutex
	st []wsRoomState // conn.rooms[i]'s at i
}

// wsRoomState is what a connection delivered and had acknowledged in one room,
// guarded by wsConn.mu.
type wsRoomState struct {
	room string
	sent replay.Position
	// before is where the connection stood in the epoch it left at its last
	// resync: an ack of it may still arrive.
	before  replay.Position
	ack     replay.Position
	acked   bool
	unacked int64
}

// roomState is the connection's state in room, nil when it is not in it. A
// connection has few rooms (--max-rooms-per-stream): a scan costs less than a map
// every idle connection would hold. wc.mu must be held.
func (wc *wsConn) roomState(room string) *wsRoomState {
	for i := range wc.st {
		if wc.st[i].room == room {
			return &wc.st[i]
		}
	}
	return nil
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
		if wc.lp != nil {
			// On the idle loop nothing waits on kicked: the worker is told.
			wc.lp.wake()
		}
	})
}

// send queues an answer for the writer, in order; false when the connection ended.
func (wc *wsConn) send(b []byte) bool {
	if wc.lp != nil {
		wc.lp.answer(b)
		return true
	}
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
		writeError(w, unavailable("the credential could not be checked now: its store ("+s.logName()+") cannot be reached; retry later"))
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
	if reject == "" {
		release, reject = s.admitUser(who, release)
	}
	if reject == rejectUser {
		s.m.streamsTurned.WithLabelValues(reject).Inc()
		writeError(w, unavailable("this user holds as many connections on this pod as it may (--max-streams-per-user); close one, or retry later"))
		return
	}
	if reject != "" {
		s.m.streamsTurned.WithLabelValues(reject).Inc()
		writeError(w, unavailable("the pod cannot take this connection now; retry, another pod may"))
		return
	}
	if s.loop != nil && r.ProtoMajor == 1 && r.TLS == nil {
		// The idle loop serves the connection once it has said hello (see
		// wsloop.go); the release goes with it.
		s.wsOnLoop(w, r, who, release)
		return
	}
	defer release()

	wc := s.newWSConn(r, who, false)
	defer wc.cancel()
	wc.helloCh, wc.welcomed, wc.readDone = make(chan wsFrame, 1), make(chan struct{}), make(chan struct{})
	wc.out = make(chan []byte, wsOutQueue)
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
	s.wsOpen.Add(1) // finish takes it back
	go wc.read()
	code, reason := wc.run()
	wc.finish(code, reason)
}

// newWSConn starts the state of a connection upgraded for who, on the idle loop's
// path or the library's.
func (s *Server) newWSConn(r *http.Request, who auth.Principal, onLoop bool) *wsConn {
	// The connection outlives its request: its context keeps nothing of the
	// request's (no value of it is read), which an idle connection would hold. On
	// the loop nothing waits on it (no reader or pinger goroutine to stop): the
	// calls it makes to the log and the registry end by their own timeouts, and an
	// idle connection holds no context, done channel or map of children.
	ctx, cancel := context.Background(), func() {}
	if !onLoop {
		ctx, cancel = context.WithCancel(ctx)
	}
	wc := &wsConn{s: s, r: r, who: who, session: newSession(), since: time.Now(), ctx: ctx, cancel: cancel,
		kicked: make(chan struct{})}
	wc.claimant = s.wsClaimant(r, &wc.who)
	wc.identity = wc.claimantOrWho().Identity()
	wc.lastSeen.Store(time.Now().UnixNano())
	return wc
}

// finish closes the connection with code (none: the peer is gone or the socket
// broke) and waits for its goroutines. The connection stops counting as open once
// its close is decided, as on the idle loop: the close handshake with a silent peer
// may take the library's 5 s.
func (wc *wsConn) finish(code websocket.StatusCode, reason string) {
	wc.closing(code, reason)
	wc.s.wsOpen.Add(-1)
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

// closing counts and logs the close, before the peer hears of it.
func (wc *wsConn) closing(code websocket.StatusCode, reason string) {
	wc.s.wsClosed.WithLabelValues(closeLabel(code)).Inc()
	wc.logClose(code, reason)
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
	if h := s.hooks(); h != nil && h.beforeHello != nil {
		h.beforeHello(wc.readDone)
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
	wc.client, wc.boot, wc.agent = h.client, h.boot, h.agent
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
	defer wc.conn.leave()
	refresh := time.NewTicker(s.cfg.OwnerTTL / 3)
	defer refresh.Stop()
	c := wc.conn
	c.out, c.kicked, c.gone, c.refresh, c.onRefresh = wc.out, wc.kicked, wc.readDone, refresh.C, wc.refresh
	defer c.runCleanup()
	c.serve(wc.who, h.from, h.resumed)
	return wc.code, wc.why
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
			_ = wc.writeFrame(wsErrorOf("", room, errNoCredential))
			return wsUnauthorized, "unauthorized: room " + room
		default:
			wc.s.refuse("subscribe", "grant")
			_ = wc.writeFrame(wsErrorOf("", room, errNotGranted("subscribing to", room)))
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
	wc.conn = s.newConn(wc.ctx, kindWS, wc, len(h.names))
	if err := wc.conn.join(h.names); err != nil {
		s.cfg.Logger.Warn("websocket join failed", "rooms", h.names, "err", err)
		if errors.Is(err, replay.ErrUnavailable) {
			return s.wsCloseFor(rooms.ReasonUnavailable)
		}
		return wsTryAgainLater, "a room is unavailable now"
	}
	return 0, ""
}

// writeFrame sends one frame. The connection bounds the write by the write timeout (see
// corkConn), so the library gets a context without a deadline and sets no timer.
func (wc *wsConn) writeFrame(p []byte) error {
	if wc.lp != nil {
		return wc.lp.writeNow(wc.s.cfg.WriteTimeout, p)
	}
	return wc.c.Write(context.Background(), websocket.MessageText, p)
}

// writeAll sends frames (msgs[i] is buf[ends[i-1]:ends[i]]); several go out in one
// write (see corkConn).
func (wc *wsConn) writeAll(buf []byte, ends []int) error {
	if len(ends) == 0 {
		return nil
	}
	if len(ends) == 1 {
		return wc.writeFrame(buf[:ends[0]])
	}
	wc.cork.cork()
	if h := wc.s.hooks(); h != nil && h.corked != nil {
		h.corked(wc.conn)
	}
	var err error
	start := 0
	for _, end := range ends {
		if err = wc.writeFrame(buf[start:end]); err != nil {
			break
		}
		start = end
	}
	if uerr := wc.cork.uncork(); err == nil {
		err = uerr
	}
	return err
}

// wsFraming is an event's WebSocket frame, encoded once per event and shared by
// every connection.
var wsFraming = &rooms.Framing{Slot: 1, Encode: wsEventFrame}

// open sets each room's delivery state and writes the welcome, with each room's
// starting position; the reader goes on once it is out.
func (wc *wsConn) open(c *conn, _ []bool) error {
	welcome := wsWelcomeFrame{V: wsVersion, Kind: wsWelcome, Session: wc.session, Rooms: make(map[string]string, len(c.rooms))}
	st := make([]wsRoomState, len(c.rooms))
	for i := range c.rooms {
		r := &c.rooms[i]
		welcome.Rooms[r.name] = r.sent.String()
		st[i] = wsRoomState{room: r.name, sent: r.sent}
	}
	wc.mu.Lock()
	wc.st = st
	wc.mu.Unlock()
	if err := wc.writeFrame(wsJSON(welcome)); err != nil {
		return err
	}
	if wc.welcomed != nil {
		close(wc.welcomed) // the library's path: its reader goes on
	}
	return nil
}

func (wc *wsConn) appendEvent(dst []byte, _ *conn, _ int, it *rooms.Item) []byte {
	return append(dst, it.Encoded(wsFraming)...)
}

func (wc *wsConn) appendResync(dst []byte, c *conn, i int, head replay.Position, fork bool) []byte {
	return appendWSResync(dst, c.rooms[i].name, head, fork)
}

// record notes what the connection sent of each room, before the write: a client
// may acknowledge an event as soon as it reads it, before the write returns.
func (wc *wsConn) record(c *conn) {
	wc.mu.Lock()
	for i := range c.rooms {
		r, st := &c.rooms[i], &wc.st[i]
		st.advance(r.sent)
		st.unacked += int64(r.batched)
		r.batched = 0
	}
	wc.mu.Unlock()
}

func (wc *wsConn) write(_ *conn, buf []byte, ends []int) error { return wc.writeAll(buf, ends) }

func (wc *wsConn) interval() time.Duration { return wc.s.cfg.WSPing }

// tick pings the peer (see wsalive.go for the pong's deadline).
func (wc *wsConn) tick(_ *conn, _ time.Time) rooms.Reason {
	wc.ping()
	return 0
}

// ping sends a ping, unless one is still waiting for its pong, and closes the
// connection with 4408 when neither its pong nor any other frame comes within the
// pong timeout.
func (wc *wsConn) ping() {
	if wc.pinging.Swap(true) {
		return
	}
	wc.pings.Add(1)
	go func() {
		defer wc.pings.Done()
		defer wc.pinging.Store(false)
		sent := time.Now()
		ctx, cancel := context.WithTimeout(wc.ctx, wc.s.cfg.WSPongTimeout)
		defer cancel()
		if err := wc.c.Ping(ctx); err != nil && wc.ctx.Err() == nil && wc.silent(time.Now(), sent.UnixNano()) {
			wc.kickSilent()
		}
	}()
}

// end maps why the connection ended to its close code: a kick's code wins.
func (wc *wsConn) end(_ *conn, reason rooms.Reason) {
	wc.code, wc.why = wc.s.wsCloseFor(reason)
	if reason == reasonKicked {
		wc.code, wc.why = wc.kickCode, wc.kickReason
	}
}

// wsCloseFor is the close code and reason of a connection that ended for reason. A
// connection the event log failed is told which backend could not be reached, in at
// most the 123 bytes a close reason holds.
func (s *Server) wsCloseFor(reason rooms.Reason) (websocket.StatusCode, string) {
	switch reason {
	case rooms.ReasonShed:
		return wsServiceRestart, "the pod is draining: reconnect and resume"
	case rooms.ReasonShutdown:
		return wsGoingAway, "the pod is shutting down: reconnect and resume"
	case rooms.ReasonSlowConsumer:
		return wsTryAgainLater, "slow consumer: reconnect and resume from the last id"
	case rooms.ReasonUnavailable:
		why := "the event log (" + s.logName() + ") is unreachable: reconnect later"
		if len(why) > 123 {
			why = "the event log (" + s.backend().Kind + ") is unreachable: reconnect later"
		}
		return wsTryAgainLater, why
	case rooms.ReasonReauth:
		return wsUnauthorized, "the credential expired or was revoked"
	}
	return 0, ""
}
