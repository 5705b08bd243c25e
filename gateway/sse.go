package gateway

import (
	"strconv"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/wire"
)

// AppendFrame appends one SSE frame (wire.AppendFrame).
func AppendFrame(dst []byte, id, event string, data []byte) []byte {
	return wire.AppendFrame(dst, id, event, data)
}

// EventFrame encodes ev as its SSE frame on a room's stream (wire.EventFrame).
func EventFrame(ev replay.Event) []byte { return wire.EventFrame(ev) }

// appendResyncFields appends a resync's frame after its id line: event resync and
// data {"room","epoch","seq"}, with "fork":true for a fork (the log holds another
// event at a position the reader was already given, so the reader must go back to
// the position even when it is behind what it has seen). The id line is the
// position the reader resumes from.
func appendResyncFields(dst []byte, room string, head replay.Position, fork bool) []byte {
	dst = append(dst, "event: resync\ndata: "...)
	dst = appendPositionJSON(dst, room, head)
	if fork {
		dst = append(dst[:len(dst)-1], `,"fork":true}`...)
	}
	return append(dst, '\n', '\n')
}

// appendPositionJSON appends {"room","epoch","seq"}: the data of a resync and of a
// single-room anchor. Room names and epochs need no escaping.
func appendPositionJSON(dst []byte, room string, pos replay.Position) []byte {
	dst = append(dst, `{"room":"`...)
	dst = append(dst, room...)
	dst = append(dst, `","epoch":"`...)
	dst = append(dst, pos.Epoch...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, pos.Seq, 10)
	return append(dst, '}')
}

// retryFrame is a reconnect hint: "retry: <ms>" and a blank line.
func retryFrame(dst []byte, ms int64) []byte {
	dst = append(dst, "retry: "...)
	dst = strconv.AppendInt(dst, ms, 10)
	return append(dst, '\n', '\n')
}

// AnchorType is the event type of a stream's anchor. A stream opened without a resume
// point sends it right after retry:, with the stream's starting position as its id,
// so that a reconnect before the first event resumes from there. It is a named event
// with data, not an id-only block: clients that take an id only from a block with
// data (the npm eventsource before 5.1.1) would lose the id of that block, while
// EventSource hands a named event to its listeners only, never to onmessage.
const AnchorType = wire.AnchorType

// anchorFrame appends a single-room stream's anchor: event anchor, pos as its id and
// {"room","epoch","seq"} as its data. A position without epoch (a room with no
// history) is "<seq>", which resumes in whatever epoch is current; its data has
// epoch "".
func anchorFrame(dst []byte, room string, pos replay.Position) []byte {
	dst = wire.AppendField(dst, "id: ", pos.String())
	dst = append(dst, "event: "+AnchorType+"\ndata: "...)
	dst = appendPositionJSON(dst, room, pos)
	return append(dst, '\n', '\n')
}

var heartbeatFrame = []byte(": hb\n\n")

// appendMuxAnchor appends a multiplexed stream's anchor: event anchor, the token of
// every room's starting point as its id, and as its data each room's position as a
// single-room id, {"rooms":{"<room>":"<position>",…}}, the shape of a WebSocket
// welcome's rooms.
func (t *sseStream) appendMuxAnchor(dst []byte, c *conn) []byte {
	dst = t.appendID(dst, c, 0)
	dst = append(dst, "event: "+AnchorType+"\ndata: {\"rooms\":{"...)
	for i := range c.rooms {
		if i > 0 {
			dst = append(dst, ',')
		}
		r := &c.rooms[i]
		dst = append(dst, '"')
		dst = append(dst, r.name...)
		dst = append(dst, `":"`...)
		if r.sent.Epoch != "" {
			dst = append(dst, r.sent.Epoch...)
			dst = append(dst, ':')
		}
		dst = strconv.AppendUint(dst, r.sent.Seq, 10)
		dst = append(dst, '"')
	}
	return append(dst, "}}\n\n"...)
}
