package gateway

import (
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/replay"
)

// The reading side of a WebSocket connection: its own goroutine reads the client's
// frames, hands the hello to the writer and serves the rest one at a time, so that
// answers keep the order of the frames they answer.

// read reads the client's frames until the connection ends: the hello goes to the
// writer; acks, publishes and pings are served here, one at a time.
func (wc *wsConn) read() {
	defer close(wc.readDone)
	helloSeen := false
	for {
		typ, p, err := wc.c.Read(wc.ctx)
		if err != nil {
			return
		}
		now := time.Now()
		wc.lastSeen.Store(now.UnixNano())
		if !helloSeen {
			if typ != websocket.MessageText {
				wc.kick(wsBadHello, "bad hello: frames are JSON text messages")
				return
			}
			f, err := decodeWSFrame(p)
			if err != nil {
				wc.kick(wsBadHello, "bad hello: "+err.Error())
				return
			}
			helloSeen = true
			select {
			case wc.helloCh <- f:
			default:
			}
			select {
			case <-wc.welcomed:
				continue
			case <-wc.kicked:
			case <-wc.ctx.Done():
			}
			// The hello was refused: read on until the close handshake ends.
			continue
		}
		select {
		case <-wc.kicked:
			continue // closing: read on until the close handshake ends
		default:
		}
		in := wc.inbound(now, typ == websocket.MessageText, p)
		switch {
		case in.code != 0:
			wc.kick(in.code, in.why)
		case in.answer != nil:
			wc.send(in.answer)
		case in.serve:
			wc.serve(in.f)
		}
	}
}

// serve answers one frame after the hello.
func (wc *wsConn) serve(f wsFrame) {
	switch f.Kind {
	case wsAck:
		if aerr := wc.ack(f); aerr != nil {
			wc.send(wsErrorOf("", f.Room, aerr))
		} else {
			wc.s.receipts.acked(wc, f.Room, f.ID)
		}
	case wsPublish:
		wc.send(wc.publish(f))
	case wsPing:
		pong := wsPongFrame{V: wsVersion, Kind: wsPong}
		if len(f.Data) <= maxPingData {
			pong.Data = f.Data
		}
		wc.send(wsJSON(pong))
	case wsHello:
		wc.send(wsErrorOf("", "", newError(0, "unexpected_hello", "the connection has said hello already")))
	default:
		kind := f.Kind
		if len(kind) > 64 {
			kind = kind[:64]
		}
		wc.send(wsErrorOf("", "", newError(0, "unknown_kind", "unknown frame kind "+quoteKind(kind)+": this gateway takes ack, publish and ping")))
	}
}

func quoteKind(k string) string {
	b := wsJSON(k)
	return string(b)
}

var errBadAck = newError(0, "invalid_ack", "an ack names a room of the connection and an id it was delivered, <epoch>:<seq>")

// ack records the client's last processed id in a room.
func (wc *wsConn) ack(f wsFrame) *apiError {
	pos, err := replay.ParsePosition(f.ID)
	if err != nil || pos.Epoch == "" {
		return errBadAck
	}
	wc.mu.Lock()
	defer wc.mu.Unlock()
	st := wc.roomState(f.Room)
	if st == nil {
		return errBadAck
	}
	switch {
	case pos.Epoch == st.sent.Epoch && pos.Seq <= st.sent.Seq:
		// Seqs are dense in an epoch: no more than the seqs after the ack are
		// unacknowledged (fewer when a resync skipped some).
		st.unacked = min(st.unacked, int64(st.sent.Seq-pos.Seq))
	case pos.Epoch == st.before.Epoch && pos.Seq <= st.before.Seq:
		// A late ack of the epoch the room resynced from: recorded, and nothing
		// it counts is still unacknowledged.
	default:
		// An id this connection was never delivered in this room.
		return errBadAck
	}
	st.ack, st.acked = pos, true
	return nil
}

// publish serves a publish frame with the HTTP publish's checks and errors, under
// the upgrade request's credential; it returns the answer.
func (wc *wsConn) publish(f wsFrame) []byte {
	s := wc.s
	if !validRef(f.Ref) {
		return wsErrorOf("", f.Room, newError(0, "invalid_ref", "ref is at most 128 printable ASCII characters"))
	}
	msg, aerr := wc.parsePublish(f)
	if aerr != nil {
		s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
		return wsErrorOf(f.Ref, f.Room, aerr)
	}
	if d, aerr := wsWaitFor(f); aerr != nil || d > 0 {
		if aerr != nil {
			s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
			return wsErrorOf(f.Ref, f.Room, aerr)
		}
		return wc.publishReceipt(f, msg, d)
	}
	ev, aerr := s.append(wc.ctx, f.Room, msg)
	if aerr != nil {
		return wsErrorOf(f.Ref, f.Room, aerr)
	}
	return wsJSON(wsPublishedFrame{V: wsVersion, Kind: wsPublished, Ref: f.Ref, Room: ev.Room, ID: ev.ID(), Epoch: ev.Epoch, Seq: ev.Seq})
}

// parsePublish validates a publish frame in the order of an HTTP publish.
func (wc *wsConn) parsePublish(f wsFrame) (replay.Message, *apiError) {
	s := wc.s
	if !replay.ValidRoom(f.Room) {
		return replay.Message{}, errBadRoom
	}
	p, aerr := s.publisher(wc.publishRequest())
	if aerr != nil {
		return replay.Message{}, aerr
	}
	if aerr := s.mayPublish(p, f.Room); aerr != nil {
		return replay.Message{}, aerr
	}
	if f.Type != "" && !replay.ValidType(f.Type) {
		return replay.Message{}, typeError(f.Type)
	}
	if f.IdempotencyKey != "" && !validIdempotencyKey(f.IdempotencyKey) {
		return replay.Message{}, newError(0, "invalid_idempotency_key", "idempotency_key must be 1 to 255 printable ASCII characters")
	}
	ttl, aerr := parseTTLField(f.TTL, s.cfg.MaxTTL)
	if aerr != nil {
		return replay.Message{}, aerr
	}
	if len(f.Body) == 0 {
		return replay.Message{}, errEmptyBody
	}
	body, aerr := encode("application/json", f.Body, s.cfg.MaxBody)
	if aerr != nil {
		return replay.Message{}, aerr
	}
	typ := f.Type
	if typ == replay.DefaultType {
		typ = ""
	}
	return replay.Message{Type: typ, Body: body, IdempotencyKey: f.IdempotencyKey, TTL: ttl}, nil
}
