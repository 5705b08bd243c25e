package gatewaytest

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"time"
)

// ErrLineTooLong is returned by Decoder.Next for a line longer than the decoder's
// bound: a server that never sends a line terminator must not grow memory forever.
var ErrLineTooLong = errors.New("sse: line too long")

// maxLineBytes bounds one line, and so one data field, of the stream.
const maxLineBytes = 4 << 20

// AnchorType is the event type of a stream's anchor: the block a roomcast stream
// opened without a resume point sends right after retry:, whose id is the stream's
// starting position (a multiplexed stream sends one on every open, with its token).
// It is dispatched like any named event; a reader that follows the stream's events
// skips it, and one that resumes takes its id.
const AnchorType = "anchor"

// ExpiredType is the event type of an expired marker: an event whose deadline passed
// before it was delivered, sent with its own id and {"room","epoch","seq"} as data,
// no body. A reader counts it as delivered (Tracker.ObserveExpired).
const ExpiredType = "expired"

// Event is one dispatched SSE event. Its slices alias the decoder's buffers and are
// valid only until the next call to Next.
type Event struct {
	// ID is the last event ID in force when the event was dispatched (it persists
	// across events, as in EventSource). IDSet reports whether this event's own block
	// carried an id field.
	ID    []byte
	IDSet bool
	// Type is the event field; empty means "message".
	Type []byte
	// Data is the data fields joined by '\n'.
	Data []byte
}

// Decoder reads a text/event-stream as the HTML standard's parser does: lines end in
// LF, CRLF or a bare CR; "data", "event", "id" and "retry" are the fields; lines
// starting with ':' are comments; a blank line dispatches. It allocates nothing per
// event once its buffers have grown. A block terminated by bare CRs alone is
// dispatched once a LF or the end of the stream follows it.
type Decoder struct {
	r *bufio.Reader

	pend   []byte // rest of the current chunk, not yet split into lines
	acc    []byte // a chunk longer than the bufio buffer, put together
	eof    bool   // pend is the stream's last chunk
	err    error  // what ended the stream, returned once pend is consumed
	inited bool   // the leading byte order mark has been looked for

	data   []byte
	typ    []byte
	lastID []byte
	idSet  bool

	// The current block as sent, for NextFrame.
	block     bool // the block has a line (field or comment)
	comment   []byte
	blkRetry  int64 // the block's own retry field in ms, -1 when it has none
	blkIDSeen bool

	retry    time.Duration
	retrySet bool
}

// NewDecoder returns a decoder reading r; lastID seeds the last event ID (the id the
// connection resumed from), as an EventSource keeps it across reconnects.
func NewDecoder(r *bufio.Reader, lastID []byte) *Decoder {
	return &Decoder{r: r, lastID: append([]byte(nil), lastID...), blkRetry: -1}
}

// IsAnchor reports whether e is a stream's anchor (see AnchorType).
func (e Event) IsAnchor() bool { return string(e.Type) == AnchorType }

// Frame is one block of the stream as the server sent it, for tests that look at the
// wire rather than at what EventSource dispatches: comment-only and retry-only blocks
// are frames too, and ID is the block's own id field ("" when it has none).
type Frame struct {
	ID      string
	HasID   bool
	Event   string // the event field; "" for the default type
	Data    string // the data fields joined by '\n'
	HasData bool   // the block has a data field
	// Retry is the block's retry field in milliseconds; -1 when it has none.
	Retry int64
	// Comment is the last comment line of the block, without the leading ':' and
	// one space.
	Comment string
}

// IsAnchor reports whether f is a stream's anchor (see AnchorType).
func (f Frame) IsAnchor() bool { return f.Event == AnchorType }

// NextFrame returns the next block of the stream, whatever it holds. At the end of
// the stream it returns io.EOF (or the read error). Do not mix it with Next on one
// decoder.
func (d *Decoder) NextFrame() (Frame, error) {
	for {
		line, err := d.nextLine()
		if err != nil {
			return Frame{}, err
		}
		if len(line) > 0 {
			d.line(line)
			continue
		}
		if f, ok := d.frame(); ok {
			return f, nil
		}
	}
}

// Retry returns the last valid retry field seen, if any.
func (d *Decoder) Retry() (time.Duration, bool) { return d.retry, d.retrySet }

// LastID returns the last event ID buffer. It aliases the decoder's state.
func (d *Decoder) LastID() []byte { return d.lastID }

// Next returns the next dispatched event. At the end of the stream it returns io.EOF
// (or the read error); an event not terminated by a blank line is discarded, as the
// standard says.
func (d *Decoder) Next() (Event, error) {
	for {
		line, err := d.nextLine()
		if err != nil {
			return Event{}, err
		}
		if ev, ok := d.line(line); ok {
			return ev, nil
		}
	}
}

// nextLine returns the next complete line, reading more input as needed. At the end
// of the stream it returns what ended it; an unterminated last line is discarded.
func (d *Decoder) nextLine() ([]byte, error) {
	for {
		if len(d.pend) > 0 {
			line, rest, ok := cutLine(d.pend)
			if ok {
				d.pend = rest
				return line, nil
			}
			d.pend = nil // only the stream's last chunk can lack a terminator
		}
		if d.eof {
			return nil, d.err
		}
		if err := d.fill(); err != nil {
			return nil, err
		}
	}
}

// frame ends the current block and returns it as a Frame when it had any line.
func (d *Decoder) frame() (Frame, bool) {
	had := d.block
	f := Frame{Event: string(d.typ), Retry: d.blkRetry, Comment: string(d.comment), HasID: d.blkIDSeen}
	if d.blkIDSeen {
		f.ID = string(d.lastID)
	}
	if len(d.data) > 0 {
		f.Data, f.HasData = string(d.data[:len(d.data)-1]), true
	}
	d.dispatch()
	return f, had
}

// fill reads the next chunk, which ends in '\n' unless the stream ended.
func (d *Decoder) fill() error {
	chunk, err := d.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		d.acc = append(d.acc[:0], chunk...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(d.acc) > maxLineBytes {
				d.acc = nil
				return ErrLineTooLong
			}
			chunk, err = d.r.ReadSlice('\n')
			d.acc = append(d.acc, chunk...)
		}
		chunk = d.acc
	}
	if !d.inited {
		d.inited = true
		chunk = bytes.TrimPrefix(chunk, []byte("\xef\xbb\xbf"))
	}
	d.pend = chunk
	if err != nil {
		d.eof = true
		d.err = err
	}
	return nil
}

// cutLine splits off the first line of b, terminated by LF, CRLF or a bare CR. A CR
// that ends b is a complete terminator: b ends in LF unless the stream has ended.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	lf := bytes.IndexByte(b, '\n')
	head := b
	if lf >= 0 {
		head = b[:lf]
	}
	if cr := bytes.IndexByte(head, '\r'); cr >= 0 {
		if cr+1 < len(b) && b[cr+1] == '\n' {
			return b[:cr], b[cr+2:], true
		}
		return b[:cr], b[cr+1:], true
	}
	if lf < 0 {
		return nil, nil, false
	}
	return b[:lf], b[lf+1:], true
}

// line interprets one line and reports an event when it was a dispatching blank line.
func (d *Decoder) line(line []byte) (Event, bool) {
	if len(line) == 0 {
		return d.dispatch()
	}
	d.block = true
	if line[0] == ':' {
		d.comment = append(d.comment[:0], bytes.TrimPrefix(line[1:], []byte(" "))...)
		return Event{}, false
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		d.data = append(d.data, value...)
		d.data = append(d.data, '\n')
	case "event":
		d.typ = append(d.typ[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.lastID = append(d.lastID[:0], value...)
			d.idSet = true
			d.blkIDSeen = true
		}
	case "retry":
		if ms, ok := parseDigits(value); ok {
			d.retry, d.retrySet = time.Duration(ms)*time.Millisecond, true
			d.blkRetry = ms
		}
	}
	return Event{}, false
}

func (d *Decoder) dispatch() (Event, bool) {
	idSet := d.idSet
	d.idSet = false
	d.block, d.blkIDSeen, d.blkRetry = false, false, -1
	d.comment = d.comment[:0]
	if len(d.data) == 0 {
		d.typ = d.typ[:0]
		return Event{}, false
	}
	ev := Event{ID: d.lastID, IDSet: idSet, Type: d.typ, Data: d.data[:len(d.data)-1]}
	d.data = d.data[:0]
	d.typ = d.typ[:0]
	return ev, true
}

// parseDigits parses a non-empty run of ASCII digits, saturating well below overflow
// of a millisecond time.Duration.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < 1e12 {
			n = n*10 + int64(c-'0')
		}
	}
	return n, true
}

// UintAfter finds key in b and parses the unsigned decimal right after it, so a field
// of a one-line JSON envelope can be read without unmarshalling the whole object.
func UintAfter(b, key []byte) (uint64, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0, false
	}
	var n uint64
	digits := 0
	for _, c := range b[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		if n > (math.MaxUint64-9)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		digits++
	}
	return n, digits > 0
}

// StringAfter finds key (ending in the opening quote) in b and returns the string
// value up to the closing quote; it is meant for values that need no escaping.
func StringAfter(b, key []byte) ([]byte, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return nil, false
	}
	rest := b[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, false
	}
	return rest[:j], true
}
