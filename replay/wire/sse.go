package wire

import (
	"bytes"
	"strconv"
)

// AnchorType is the event type of a stream's anchor: the block a stream opened
// without a resume point sends right after retry:, with the stream's starting
// position as its id and a small JSON object as its data.
const AnchorType = "anchor"

// ExpiredType is the event type of an expired event's marker: an event whose
// deadline (Event.Expires) passed before it was delivered is sent as this, with its
// own id and {"room","epoch","seq"} as its data, and no body, so that a reader's
// position still moves on one seq at a time.
const ExpiredType = "expired"

// AppendFrame appends one SSE frame. CR, LF and NUL cannot occur in id or event:
// they would start a new field (or, for NUL, make browsers ignore the id), so they
// are dropped. data may hold line breaks; each line becomes its own data: field, which
// the client joins back with LF. An empty event or id is omitted.
func AppendFrame(dst []byte, id, event string, data []byte) []byte {
	if id != "" {
		dst = AppendField(dst, "id: ", id)
	}
	if event != "" {
		dst = AppendField(dst, "event: ", event)
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

// AppendField appends one field, name then value, dropping CR, LF and NUL from
// value, which would start a new field (or, for NUL, make browsers ignore an id).
func AppendField(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	for i := 0; i < len(value); i++ {
		if c := value[i]; c != '\r' && c != '\n' && c != 0 {
			dst = append(dst, c)
		}
	}
	return append(dst, '\n')
}

// EventFrame encodes ev as its SSE frame: its id line (AppendID) and EventFields.
func EventFrame(ev Event) []byte {
	fields := EventFields(ev)
	return append(AppendID(make([]byte, 0, len(fields)+len(ev.Epoch)+24), ev.Position()), fields...)
}

// EventFields encodes ev as an SSE frame without its id line: event (omitted for the
// default type) and the envelope as data. A stream writes its own id line before it
// (the event's position on a room's stream, the resume token on a multiplexed one),
// so the fields are encoded once per event and shared by every stream. It builds them
// in one allocation; anything that could break a field (a line break in the body, CR,
// LF or NUL in the room or type) takes the general path.
func EventFields(ev Event) []byte {
	event := ev.Type
	if event == DefaultType {
		event = ""
	}
	if !plainField(ev.Epoch) || !plainField(event) || !plainField(ev.Room) || hasLineBreak(ev.Body) {
		return AppendFrame(nil, "", event, ev.AppendJSON(nil))
	}
	b := make([]byte, 0, len(ev.Body)+len(ev.Epoch)+2*len(event)+len(ev.Room)+96)
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = ev.AppendJSON(b)
	return append(b, '\n', '\n')
}

// AppendID appends the id line of pos: "id: <epoch>:<seq>", or "id: <seq>" without
// an epoch (Position.String).
func AppendID(dst []byte, pos Position) []byte {
	dst = append(dst, "id: "...)
	if pos.Epoch != "" {
		if !plainField(pos.Epoch) {
			return AppendField(dst[:len(dst)-4], "id: ", pos.String())
		}
		dst = append(dst, pos.Epoch...)
		dst = append(dst, ':')
	}
	dst = strconv.AppendUint(dst, pos.Seq, 10)
	return append(dst, '\n')
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
