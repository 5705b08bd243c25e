package wire

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// Event is one published message as every reader sees it: the envelope of the wire
// protocol.
type Event struct {
	Room  string
	Epoch string
	Seq   uint64
	// TS is the publish time in Unix milliseconds.
	TS   int64
	Type string
	// Body is compact, single-line JSON. It is shared by every reader: never modify it.
	Body json.RawMessage
	// Expires is the event's deadline in Unix milliseconds, on the clock of TS: from
	// then on it is delivered as an expired marker (ExpiredType), never itself. Zero:
	// it never expires.
	Expires int64
}

// ExpiredAt reports whether the event's deadline has passed at now (Unix
// milliseconds).
func (e Event) ExpiredAt(now int64) bool { return e.Expires != 0 && e.Expires <= now }

// MaxSeq is the largest seq any log assigns or accepts as a position inside its
// history: 15 decimal digits, the bound of the Redis function's integer arguments,
// and below 2^53, so a browser's JSON numbers hold every seq exactly. A resume point
// beyond it is well formed but ahead of every head: a resync.
const MaxSeq = 999_999_999_999_999

// DefaultType is the event type of an event published without one. SSE frames omit it.
const DefaultType = "message"

// Position is a place in a room's history: the last event a reader has seen.
// The zero Position is "before the first event of whatever epoch is current".
type Position struct {
	// Epoch is empty for a bare seq ("in the current epoch") and for a room that has
	// no history yet.
	Epoch string
	Seq   uint64
}

// String formats p as an event id, "<epoch>:<seq>", or a bare "<seq>" without epoch.
func (p Position) String() string {
	if p.Epoch == "" {
		return strconv.FormatUint(p.Seq, 10)
	}
	return p.Epoch + ":" + strconv.FormatUint(p.Seq, 10)
}

// Position is the event's own place in its room's history.
func (e Event) Position() Position { return Position{Epoch: e.Epoch, Seq: e.Seq} }

// ID is the event's SSE id, "<epoch>:<seq>".
func (e Event) ID() string { return e.Position().String() }

// AppendJSON appends the envelope as one line of compact JSON:
// {"room","epoch","seq","ts","type","body"}.
func (e Event) AppendJSON(dst []byte) []byte {
	// Room, epoch and type are validated to characters that need no JSON escaping;
	// Body is compact JSON already.
	dst = append(dst, `{"room":"`...)
	dst = append(dst, e.Room...)
	dst = append(dst, `","epoch":"`...)
	dst = append(dst, e.Epoch...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, e.TS, 10)
	dst = append(dst, `,"type":"`...)
	dst = append(dst, e.typeName()...)
	dst = append(dst, `","body":`...)
	if len(e.Body) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, e.Body...)
	}
	return append(dst, '}')
}

func (e Event) typeName() string {
	if e.Type == "" {
		return DefaultType
	}
	return e.Type
}

// ErrBadPosition is returned by ParsePosition for anything but "<seq>" or
// "<epoch>:<seq>".
var ErrBadPosition = errors.New("replay: malformed event id")

// maxEpochLen bounds an epoch's length; ours are 8 characters.
const maxEpochLen = 32

// ParsePosition parses a resume point: "<epoch>:<seq>" or a bare "<seq>" meaning the
// current epoch. A seq of up to 32 digits parses; one past uint64 reads as the
// largest uint64, which is past every head. Surrounding spaces are ignored; an
// empty string is an error.
func ParsePosition(s string) (Position, error) {
	s = strings.TrimSpace(s)
	epoch, seqText, found := strings.Cut(s, ":")
	if !found {
		epoch, seqText = "", s
	} else if !ValidEpoch(epoch) {
		return Position{}, ErrBadPosition
	}
	seq, ok := ParseSeq(seqText)
	if !ok {
		// A longer number is still a position: past every head (MaxSeq), so the
		// reader resyncs like any reader ahead of the head, rather than being
		// refused with a status a browser never retries.
		if len(seqText) > 20 && len(seqText) <= maxSeqDigits && allDigits(seqText) || overflows(seqText) {
			return Position{Epoch: epoch, Seq: math.MaxUint64}, nil
		}
		return Position{}, ErrBadPosition
	}
	return Position{Epoch: epoch, Seq: seq}, nil
}

// maxSeqDigits bounds the digits of a resume point's seq; any number of digits up to
// it parses (one past uint64 saturates).
const maxSeqDigits = 32

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// overflows reports 20 digits that do not fit a uint64.
func overflows(s string) bool {
	if len(s) != 20 || !allDigits(s) {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err != nil
}

// ParseSeq reads a seq: plain decimal digits only (no sign, no spaces), at most 20
// digits, no overflow.
func ParseSeq(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// ValidEpoch reports whether s can name an epoch: 1 to 32 ASCII letters, digits,
// - and _.
func ValidEpoch(s string) bool {
	if len(s) == 0 || len(s) > maxEpochLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
