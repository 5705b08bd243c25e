package gateway

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// A multiplexed stream, GET /events?room=a&room=b…, follows several rooms on one
// connection. Its frames are those of the rooms' own streams, except that each id is
// the stream's resume token (replay.ParseToken), which holds every room's position.
// The request goroutine serves every room: the members ring one bell
// (rooms.JoinBell), and each write batch takes at most a per-room budget from each
// queue in turn, so a busy room cannot starve the others.

// MaxRoomsPerStreamLimit is the largest MaxRoomsPerStream accepted: 64 rooms'
// token stays within replay.MaxTokenLen.
const MaxRoomsPerStreamLimit = 64

var (
	errBadRooms = newError(http.StatusBadRequest, "invalid_rooms",
		"name the stream's rooms as ?room=a&room=b, each 1 to 128 characters of A-Z a-z 0-9 . _ ~ -")
	errBadToken = newError(http.StatusBadRequest, "invalid_last_event_id",
		"the resume point of a multiplexed stream is a token of the same rooms, as its frames' ids carry")
)

func errTooManyRooms(max int) *apiError {
	return newError(http.StatusBadRequest, "too_many_rooms", "a stream follows at most "+strconv.Itoa(max)+" distinct rooms")
}

// streamRooms reads a multiplexed stream's rooms: sorted, distinct and valid.
func (s *Server) streamRooms(r *http.Request) ([]string, *apiError) {
	names := r.URL.Query()["room"]
	if len(names) == 0 {
		return nil, errBadRooms
	}
	for _, n := range names {
		if !replay.ValidRoom(n) {
			return nil, errBadRooms
		}
	}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > s.cfg.MaxRoomsPerStream {
		return nil, errTooManyRooms(s.cfg.MaxRoomsPerStream)
	}
	return names, nil
}

// muxResumePoint reads a multiplexed stream's token: the Last-Event-ID header, else
// the lastEventId query parameter (the header wins, as for one room).
func muxResumePoint(r *http.Request, names []string) ([]replay.Position, []bool, bool, *apiError) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return nil, nil, false, nil
	}
	pos, anchored, err := replay.ParseToken(v, names)
	if err != nil {
		return nil, nil, false, errBadToken
	}
	return pos, anchored, true, nil
}

// muxHead answers a HEAD of a multiplexed stream: the checks of a GET, with the
// status a GET would get, without joining, and without redeeming a ticket (see
// headSubscriber).
func (s *Server) muxHead(w http.ResponseWriter, r *http.Request) {
	names, aerr := s.streamRooms(r)
	if aerr == nil {
		_, _, _, aerr = muxResumePoint(r, names)
	}
	if aerr == nil {
		aerr = s.headSubscriber(r, names...)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.openStream(w)
	w.WriteHeader(http.StatusOK)
}

// muxRoom is one room of a multiplexed stream.
type muxRoom struct {
	liveRoom
	enc []byte // sent as the token's part: "." and the position
}

func (r *muxRoom) set(p replay.Position) {
	r.sent = p
	r.enc = replay.AppendTokenPos(r.enc[:0], p, false)
}

// muxStream is the state of one multiplexed stream, owned by its request goroutine.
type muxStream struct {
	s     *Server
	sw    *streamWriter
	rooms []muxRoom
	head  []byte // the token's prefix and room set
	bell  chan struct{}
	// beforeBatch, when set, runs before each live batch is gathered (tests hold it
	// to let queues fill).
	beforeBatch func()

	batch liveBatch // the live batch being gathered
}

// room, full and add gather the stream's live batches (see roundRobin).
func (ms *muxStream) room(i int) *liveRoom { return &ms.rooms[i].liveRoom }

func (ms *muxStream) full() bool { return len(ms.batch.buf) >= batchBytes }

func (ms *muxStream) add(i int, it *rooms.Item) {
	b := &ms.batch
	before := b.n
	if b.buf, b.n = ms.appendItem(b.buf, b.n, &ms.rooms[i], it); b.n != before {
		b.ts = append(b.ts, it.TS())
	}
}

// appendID appends the frame's id line: the token of every room's sent position.
func (ms *muxStream) appendID(dst []byte) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, ms.head...)
	for i := range ms.rooms {
		dst = append(dst, ms.rooms[i].enc...)
	}
	return append(dst, '\n')
}

// appendFrame appends a room's frame with the token as its id in place of the
// room's own.
func (ms *muxStream) appendFrame(dst, frame []byte) []byte {
	if bytes.HasPrefix(frame, []byte("id: ")) {
		if i := bytes.IndexByte(frame, '\n'); i >= 0 {
			frame = frame[i+1:]
		}
	}
	return append(ms.appendID(dst), frame...)
}

func (s *Server) multiStream(w http.ResponseWriter, r *http.Request) {
	names, aerr := s.streamRooms(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	from, anchored, resumed, aerr := muxResumePoint(r, names)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	who, aerr, down := s.subscriber(r, names...)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	sw := s.openStream(w)
	turnAway := func() { _ = sw.write(retryFrame(nil, retryMillis(2*s.cfg.RetryMin, 2*s.cfg.RetryMax))) }
	if down {
		s.m.streamsClosed.WithLabelValues(rooms.ReasonUnavailable.String()).Inc()
		turnAway()
		return
	}
	// One stream is one admission, whatever its rooms.
	release, reject := s.admission.admit(r)
	if reject == "" && !s.drain.Accepting() {
		release()
		reject = rejectDraining
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
		s.m.streamsTurned.WithLabelValues(reject).Inc()
		turnAway()
		return
	}
	defer release()

	ctx := r.Context()
	ms := &muxStream{s: s, sw: sw, rooms: make([]muxRoom, 0, len(names)), bell: make(chan struct{}, 1),
		head: replay.AppendTokenHead(nil, names), beforeBatch: s.muxBatchHook}
	defer func() {
		for i := range ms.rooms {
			s.rooms.Leave(ms.rooms[i].m)
		}
	}()
	for _, name := range names {
		m, err := s.rooms.JoinBell(ctx, name, ms.bell)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("stream join failed", "room", name, "err", err)
				s.m.streamsClosed.WithLabelValues(rooms.ReasonUnavailable.String()).Inc()
				turnAway()
			}
			return
		}
		ms.rooms = append(ms.rooms, muxRoom{liveRoom: liveRoom{name: name, m: m, q: m.Queue()}})
	}
	// The stream is one connection, however many members it holds: in the drain's
	// pacing and sheds, and in /admin/stats. Revocation and expiry end it through its
	// first member, which rings the bell; it counts once for its user.
	members := make([]*rooms.Member, len(ms.rooms))
	for i := range ms.rooms {
		members[i] = ms.rooms[i].m
	}
	defer s.connected(who, members)()
	s.muxStreams.Add(1)
	s.muxMembers.Add(int64(len(ms.rooms)))
	defer func() { s.muxStreams.Add(-1); s.muxMembers.Add(-int64(len(ms.rooms))) }()
	if !who.Expires.IsZero() {
		sw.credExp = who.Expires.Unix()
	}
	if !s.drain.Accepting() {
		ms.end(rooms.ReasonShed)
		return
	}
	// Every room starts where its member joined, or where the token resumes it.
	for i := range ms.rooms {
		if resumed && !anchored[i] {
			ms.rooms[i].set(from[i])
		} else {
			ms.rooms[i].set(ms.rooms[i].m.Start())
		}
	}
	// The anchor (appendAnchor): the token of every room's starting point as its id,
	// so a reconnect before the first event resumes every room from there (and an
	// empty position of the token it resumed from is filled in).
	open := retryFrame(make([]byte, 0, 128+len(ms.head)+96*len(ms.rooms)), retryMillis(s.cfg.RetryMin, s.cfg.RetryMax))
	open = ms.appendAnchor(open)
	if err := sw.write(open); err != nil {
		ms.end(reasonFor(ctx, err))
		return
	}
	s.countOpened(resumed)
	if resumed {
		for i := range ms.rooms {
			if anchored[i] {
				continue
			}
			if err := ms.replay(ctx, i); err != nil {
				ms.end(reasonFor(ctx, err))
				return
			}
		}
	}
	ms.end(ms.live(ctx))
}

// replay writes room i's history after its sent position, as Server.replay does
// for one room (from the room's latest events when they hold it), each frame
// carrying the token.
func (ms *muxStream) replay(ctx context.Context, i int) error {
	s, r := ms.s, &ms.rooms[i]
	bp := bufPool.Get().(*[]byte)
	defer putBuf(bp)
	for {
		rd, err := s.rooms.Since(ctx, r.name, r.sent, s.cfg.ReplayBatch)
		if err != nil {
			return err
		}
		buf := (*bp)[:0]
		if rd.Resync {
			s.m.resyncsSent.Inc()
			r.set(rd.From)
			buf = ms.appendFrame(buf, resyncFrame(r.name, rd.From, rd.Fork))
		}
		n := 0
		for j, ev := range rd.Events {
			r.set(ev.Position())
			buf = ms.appendFrame(buf, rd.Frames[j])
			n++
			if len(buf) >= batchBytes {
				if err := ms.sw.write(buf); err != nil {
					*bp = buf[:0]
					return err
				}
				s.countDelivered(n)
				buf, n = buf[:0], 0
			}
		}
		if len(buf) > 0 {
			if err := ms.sw.write(buf); err != nil {
				*bp = buf[:0]
				return err
			}
			s.countDelivered(n)
		}
		*bp = buf[:0]
		if r.sent.Epoch == "" {
			// A bare seq in the current epoch: pin it for the live dedup.
			r.set(replay.Position{Epoch: rd.Head.Epoch, Seq: r.sent.Seq})
		}
		if !rd.More() {
			return nil
		}
	}
}

// live serves every room's queue until the stream ends and returns why. A wake-up
// gathers one batch round-robin over the rooms (see roundRobin); whatever is left is
// taken by the next batch, without waiting for another ring.
func (ms *muxStream) live(ctx context.Context) rooms.Reason {
	s := ms.s
	quiet := s.cfg.Heartbeat / 2
	hb := time.NewTicker(quiet)
	defer hb.Stop()
	stop := context.AfterFunc(ctx, func() {
		for i := range ms.rooms {
			ms.rooms[i].m.Close(rooms.ReasonClientGone)
		}
	})
	defer stop()
	rr := newRoundRobin(len(ms.rooms))
	more := true // items may have been queued before the bell was set
	for {
		if !more {
			select {
			case <-ms.bell:
			case now := <-hb.C:
				if now.Sub(ms.sw.last) >= quiet {
					if err := ms.sw.write(heartbeatFrame); err != nil {
						return rooms.ReasonWriteFailed
					}
				}
				continue
			}
		}
		for i := range ms.rooms {
			if reason := ms.rooms[i].m.Reason(); reason != 0 {
				return reason
			}
		}
		if ms.beforeBatch != nil {
			ms.beforeBatch()
		}
		ms.batch.borrow()
		more = rr.gather(ms)
		n := ms.batch.n
		var err error
		if len(ms.batch.buf) > 0 {
			err = ms.sw.write(ms.batch.buf)
		}
		s.settle(&ms.batch, err)
		if err != nil {
			return rooms.ReasonWriteFailed
		}
		s.countDelivered(n)
		for _, i := range rr.reread {
			// The room resynced past history this stream can still read: read it
			// on from the log; the queue's copies are then skipped.
			if err := ms.replay(ctx, i); err != nil {
				return reasonFor(ctx, err)
			}
			more = true
		}
	}
}

// appendItem is Server.appendItem for one room of the stream: the frame goes out
// with the token, unless the room already sent its position.
func (ms *muxStream) appendItem(buf []byte, n int, r *muxRoom, it *rooms.Item) ([]byte, int) {
	s := ms.s
	st := stepItem(it, r.sent)
	switch {
	case st.skip:
		return buf, n
	case st.fork:
		s.m.resyncsSent.Inc()
		r.set(it.Pos)
		return ms.appendFrame(buf, ForkFrame(r.name, it.Pos)), n
	case st.resync:
		s.m.resyncsSent.Inc()
		r.set(st.resyncAt)
		buf = ms.appendFrame(buf, ResyncFrame(r.name, st.resyncAt))
	case !st.event:
		s.m.resyncsSent.Inc() // a resync notice
	}
	if st.event {
		n++
	}
	r.set(it.Pos)
	return ms.appendFrame(buf, it.Frame), n
}

// end finishes a multiplexed stream as Server.end does one: every member closes
// with the reason, and a reauth names every room.
func (ms *muxStream) end(reason rooms.Reason) {
	s, sw := ms.s, ms.sw
	if reason != rooms.ReasonWriteFailed {
		for i := range ms.rooms {
			if r := ms.rooms[i].m.Reason(); r != 0 {
				reason = r
				break
			}
		}
	}
	s.closeAll(reason, len(ms.rooms), func(i int) *rooms.Member { return ms.rooms[i].m })
	s.finish(sw, reason, ms.reauthFrame)
}

// closeAll closes the n members of one connection (member(i) is the i-th) with
// reason. When the reason is a failed write that dropped the client, it counts the
// drop, unless a member was closed before for a reason of its own (a slow consumer
// while the write was blocked, a shed): that reason is the drop, counted already.
func (s *Server) closeAll(reason rooms.Reason, n int, member func(int) *rooms.Member) {
	prior := false
	for i := range n {
		if r := member(i).Reason(); r != 0 && r != rooms.ReasonClientGone {
			prior = true
		}
	}
	for i := range n {
		member(i).Close(reason)
	}
	if reason == rooms.ReasonWriteFailed && !prior {
		s.writeDrops.Add(1)
	}
}

// reauthFrame is the stream's reauth notice, naming every room.
func (ms *muxStream) reauthFrame(exp int64) []byte {
	names := make([]string, len(ms.rooms))
	for i := range ms.rooms {
		names[i] = ms.rooms[i].name
	}
	return reauthFrame(exp, names...)
}
