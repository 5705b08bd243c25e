package gateway

import (
	"bytes"
	"strconv"

	"github.com/roomcast/roomcast/replay"
)

// AppendFrame appends one SSE frame. CR, LF and NUL cannot occur in id or event:
// they would start a new field (or, for NUL, make browsers ignore the id), so they
// are dropped. data may hold line breaks; each line becomes its own data: field, which
// the client joins back with LF. An empty event or id is omitted.
func AppendFrame(dst []byte, id, event string, data []byte) []byte {
	if id != "" {
		dst = appendField(dst, "id: ", id)
	}
	if event != "" {
		dst = appendField(dst, "event: ", event)
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if j := bytes.IndexByte(data, '\r'); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}

func appendField(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	for i := 0; i < len(value); i++ {
		if c := value[i]; c != '\r' && c != '\n' && c != 0 {
			dst = append(dst, c)
		}
	}
	return append(dst, '\n')
}

// EventFrame encodes ev as its SSE frame: id, event (omitted for the default type)
// and the envelope as data. The registry calls it once per event, not per member, so
// it builds the frame in one allocation; anything that could break a field (a line
// break in the body, CR, LF or NUL in the epoch or type) takes the general path.
func EventFrame(ev replay.Event) []byte {
	event := ev.Type
	if event == replay.DefaultType {
		event = ""
	}
	if ev.Epoch == "" || !plainField(ev.Epoch) || !plainField(event) || !plainField(ev.Room) || hasLineBreak(ev.Body) {
		return AppendFrame(nil, ev.ID(), event, ev.AppendJSON(nil))
	}
	b := make([]byte, 0, len(ev.Body)+2*len(ev.Epoch)+2*len(event)+len(ev.Room)+112)
	b = append(b, "id: "...)
	b = append(b, ev.Epoch...)
	b = append(b, ':')
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, '\n')
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = ev.AppendJSON(b)
	return append(b, '\n', '\n')
}

// plainField reports whether s can stand in an SSE field and a JSON string as is.
func plainField(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			return false
		}
	}
	return true
}

func hasLineBreak(b []byte) bool {
	return bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0
}

// ResyncFrame encodes the notice that the history between a reader's position and
// head is lost: event "resync" with data {"room","epoch","seq"}, and head as its id so
// that a reconnect resumes from there.
func ResyncFrame(room string, head replay.Position) []byte {
	return resyncFrame(room, head, false)
}

// ForkFrame encodes the resync of a forked history: the log holds another event at a
// position the reader was already given, so the reader must go back to head even
// when head is behind what it has seen. Its data adds "fork":true to a resync's.
func ForkFrame(room string, head replay.Position) []byte {
	return resyncFrame(room, head, true)
}

func resyncFrame(room string, head replay.Position, fork bool) []byte {
	data := appendPositionJSON(make([]byte, 0, 80+len(room)), room, head)
	if fork {
		data = append(data[:len(data)-1], `,"fork":true}`...)
	}
	return AppendFrame(make([]byte, 0, len(data)+64), head.String(), "resync", data)
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
const AnchorType = "anchor"

// anchorFrame appends a single-room stream's anchor: event anchor, pos as its id and
// {"room","epoch","seq"} as its data. A position without epoch (a room with no
// history) is "<seq>", which resumes in whatever epoch is current; its data has
// epoch "".
func anchorFrame(dst []byte, room string, pos replay.Position) []byte {
	dst = appendField(dst, "id: ", pos.String())
	dst = append(dst, "event: "+AnchorType+"\ndata: "...)
	dst = appendPositionJSON(dst, room, pos)
	return append(dst, '\n', '\n')
}

var heartbeatFrame = []byte(": hb\n\n")

// appendAnchor appends a multiplexed stream's anchor: event anchor, the token of
// every room's starting point as its id, and as its data each room's position as a
// single-room id, {"rooms":{"<room>":"<position>",…}}, the shape of a WebSocket
// welcome's rooms.
func (ms *muxStream) appendAnchor(dst []byte) []byte {
	dst = ms.appendID(dst)
	dst = append(dst, "event: "+AnchorType+"\ndata: {\"rooms\":{"...)
	for i := range ms.rooms {
		if i > 0 {
			dst = append(dst, ',')
		}
		r := &ms.rooms[i]
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
