package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/wire"
	"github.com/roomcast/roomcast/rooms"
)

// A publish may carry a time to live (the Event-TTL header, a batch item's or a
// WebSocket publish's ttl): the log stores the event's deadline with it, and once
// the deadline has passed the event is never delivered, live or replayed: each
// member gets its expired marker in its place, with the event's id and position and
// no body, so that positions stay dense.

// ExpiredType is the event type of an expired event's marker (wire.ExpiredType).
const ExpiredType = wire.ExpiredType

// wsExpired is the kind of a WebSocket expired marker.
const wsExpired = ExpiredType

// minTTL is the shortest time to live a publish may ask for.
const minTTL = time.Millisecond

// parseTTL reads a time to live: a Go duration ("30s", "5m", "1h30m", "1.5s") or
// whole seconds ("90", plain digits), at least 1ms and at most max (the history's lifetime: a
// longer one could not be kept anyway). The error is an invalid_ttl answer.
func parseTTL(s string, max time.Duration) (time.Duration, *apiError) {
	var d time.Duration
	if n, ok := wire.ParseSeq(s); ok {
		// Whole seconds: plain digits, as a seq is written.
		if n > uint64(max/time.Second)+1 {
			return 0, ttlTooLong(max)
		}
		d = time.Duration(n) * time.Second
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, errBadTTL
		}
	}
	switch {
	case d < minTTL:
		return 0, errBadTTL
	case d > max:
		return 0, ttlTooLong(max)
	}
	return d, nil
}

var errBadTTL = newError(http.StatusBadRequest, "invalid_ttl",
	`the ttl must be a positive Go duration ("30s", "5m", "1h30m") or whole seconds ("90"), at least 1ms`)

func ttlTooLong(max time.Duration) *apiError {
	return newError(http.StatusBadRequest, "invalid_ttl",
		"the ttl is longer than the history is kept ("+max.String()+"): the event would be forgotten before it expired")
}

// parseTTLField reads the ttl of a batch item or a WebSocket publish: absent or null
// for none, else a JSON string in parseTTL's format or a JSON integer of seconds.
func parseTTLField(raw json.RawMessage, max time.Duration) (time.Duration, *apiError) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return 0, nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, errBadTTL
		}
		return parseTTL(s, max)
	}
	return parseTTL(string(raw), max)
}

// publishTTL reads a publish request's Event-TTL header (canonically Event-Ttl):
// none when absent; present but empty is refused.
func (s *Server) publishTTL(r *http.Request) (time.Duration, *apiError) {
	v, ok := r.Header["Event-Ttl"]
	if !ok {
		return 0, nil
	}
	return parseTTL(v[0], s.cfg.MaxTTL)
}

// appendItem appends room i's event as the transport frames it or, once its
// deadline has passed, its expired marker. now is the batch's clock in Unix
// milliseconds, read once per batch and only for an event with a deadline (0: not
// read yet).
func (c *conn) appendItem(dst []byte, i int, it *rooms.Item, now *int64) []byte {
	if it.Event.Expires != 0 {
		if *now == 0 {
			*now = time.Now().UnixMilli()
		}
		if it.Event.ExpiredAt(*now) {
			return c.t.appendExpired(dst, c, i, it.Pos)
		}
	}
	return c.t.appendEvent(dst, c, i, it)
}

// appendExpired appends an expired marker on an SSE stream: its id line (the
// position, or a multiplexed stream's token), event expired and
// {"room","epoch","seq"}.
func (t *sseStream) appendExpired(dst []byte, c *conn, i int, pos replay.Position) []byte {
	dst = t.appendID(dst, c, i)
	dst = append(dst, "event: "+ExpiredType+"\ndata: "...)
	dst = appendPositionJSON(dst, c.rooms[i].name, pos)
	return append(dst, '\n', '\n')
}

func (wc *wsConn) appendExpired(dst []byte, c *conn, i int, pos replay.Position) []byte {
	return appendWSExpired(dst, c.rooms[i].name, pos)
}

// appendWSExpired appends a WebSocket expired marker:
// {"v":1,"kind":"expired","id","room","epoch","seq"}.
func appendWSExpired(dst []byte, room string, pos replay.Position) []byte {
	dst = appendWSHead(dst, wsExpired)
	dst = appendWSID(dst, pos)
	// The position's fields follow, without their opening brace.
	n := len(dst)
	dst = appendPositionJSON(dst, room, pos)
	return append(dst[:n], dst[n+1:]...)
}
