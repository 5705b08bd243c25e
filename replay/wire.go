package replay

import (
	"encoding/json"
	"time"

	"github.com/roomcast/roomcast/replay/wire"
)

// The wire vocabulary (events, positions, resume tokens, room names, event types,
// client ids and boots) lives in package wire, which imports nothing heavy, so that
// clients and tools can use it without linking a Redis client. Package replay names
// the same things, for the code that keeps history.

// Event is one published message as every reader sees it (wire.Event).
type Event = wire.Event

// Position is a place in a room's history (wire.Position).
type Position = wire.Position

// Message is what a publisher hands to Log.Append.
type Message struct {
	// Type is the SSE event type; empty means DefaultType.
	Type string
	// Body is compact JSON (no raw newlines), validated by the caller.
	Body json.RawMessage
	// IdempotencyKey, when set, makes a retried Append inside the key's TTL return the
	// original event instead of publishing a new one.
	IdempotencyKey string
	// TTL, when positive, is the event's time to live: its deadline (Event.Expires)
	// is its publish time plus TTL, rounded up to a whole millisecond, on the clock
	// that stamps ts (the pod's in memory, the Redis node's in fleet mode). Zero: it
	// never expires. Negative is ErrInvalid.
	TTL time.Duration
}

// ttlMillis is m's TTL in whole milliseconds, rounded up (0 for none).
func (m *Message) ttlMillis() int64 {
	if m.TTL <= 0 {
		return 0
	}
	return int64((m.TTL + time.Millisecond - 1) / time.Millisecond)
}

// maxTTL bounds Message.TTL: a deadline must fit the 15 digits the Redis function
// takes.
const maxTTL = 10 * 365 * 24 * time.Hour

// validTTL reports whether m's TTL is none or within maxTTL.
func (m *Message) validTTL() bool { return m.TTL >= 0 && m.TTL <= maxTTL }

const (
	// MaxSeq is the largest seq a log assigns (wire.MaxSeq).
	MaxSeq = wire.MaxSeq
	// DefaultType is the event type of a publish that names none.
	DefaultType = wire.DefaultType
	// MaxRoomLen and MaxTypeLen bound room names and event types.
	MaxRoomLen = wire.MaxRoomLen
	MaxTypeLen = wire.MaxTypeLen
	// MaxTokenLen bounds a resume token.
	MaxTokenLen = wire.MaxTokenLen
)

var (
	// ErrBadPosition: a malformed event id (wire.ErrBadPosition).
	ErrBadPosition = wire.ErrBadPosition
	// ErrBadToken: a malformed or foreign resume token (wire.ErrBadToken).
	ErrBadToken = wire.ErrBadToken
)

// ParsePosition reads an event id (wire.ParsePosition).
func ParsePosition(s string) (Position, error) { return wire.ParsePosition(s) }

// ValidRoom reports whether name is a room name (wire.ValidRoom).
func ValidRoom(name string) bool { return wire.ValidRoom(name) }

// ValidType reports whether t is an event type a publisher may use (wire.ValidType).
func ValidType(t string) bool { return wire.ValidType(t) }

// Reserved reports whether t is reserved to the gateway or EventSource (wire.Reserved).
func Reserved(t string) bool { return wire.Reserved(t) }

// RoomSetHash, AppendTokenHead, AppendTokenPos, FormatToken and ParseToken write
// and read resume tokens of multiplexed streams (see package wire).
func RoomSetHash(rooms []string) uint32                 { return wire.RoomSetHash(rooms) }
func AppendTokenHead(dst []byte, rooms []string) []byte { return wire.AppendTokenHead(dst, rooms) }
func AppendTokenPos(dst []byte, p Position, anchored bool) []byte {
	return wire.AppendTokenPos(dst, p, anchored)
}
func FormatToken(rooms []string, pos []Position, anchored []bool) string {
	return wire.FormatToken(rooms, pos, anchored)
}
func ParseToken(s string, rooms []string) ([]Position, []bool, error) {
	return wire.ParseToken(s, rooms)
}

// ValidClient and ValidSession check client ids and sessions; ParseBoot,
// CompareBoots, BootTime and NewBoot read, order and make boots (see package wire).
func ValidClient(id string) bool         { return wire.ValidClient(id) }
func ValidSession(id string) bool        { return wire.ValidSession(id) }
func ParseBoot(s string) (string, error) { return wire.ParseBoot(s) }
func CompareBoots(a, b string) int       { return wire.CompareBoots(a, b) }
func BootTime(boot string) time.Time     { return wire.BootTime(boot) }
func NewBoot(at time.Time) string        { return wire.NewBoot(at) }
func validEpoch(s string) bool           { return wire.ValidEpoch(s) }
