package wire

import (
	"bytes"
	"strconv"
)

// AnchorType is the event type of a stream's anchor: the block a stream opened
// without a resume point sends right after retry:, with the stream's starting
// position as its id and a small JSON object as its data.
const AnchorType = "anchor"

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

// EventFrame encodes ev as its SSE frame: id, event (omitted for the default type)
// and the envelope as data. The registry calls it once per event, not per member, so
// it builds the frame in one allocation; anything that could break a field (a line
// break in the body, CR, LF or NUL in the epoch or type) takes the general path.
func EventFrame(ev Event) []byte {
	event := ev.Type
	if event == DefaultType {
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
