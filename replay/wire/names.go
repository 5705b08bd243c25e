package wire

import "strings"

// Room names and event types are validated before anything else touches them: a room
// name ends up in log keys and doorbell channels (where "{" or "}" would change the
// Redis hash slot), and a type ends up in an SSE "event:" field (where CR or LF would
// inject fields).

// MaxRoomLen and MaxTypeLen bound room names and event types.
const (
	MaxRoomLen = 128
	MaxTypeLen = 64
)

// ValidRoom reports whether name matches [A-Za-z0-9._~-]{1,128}.
func ValidRoom(name string) bool {
	if len(name) == 0 || len(name) > MaxRoomLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !roomByte(name[i]) {
			return false
		}
	}
	return true
}

// ValidType reports whether t matches [A-Za-z0-9._-]{1,64} and is not a name the
// gateway sends itself (see Reserved).
func ValidType(t string) bool {
	if len(t) == 0 || len(t) > MaxTypeLen || Reserved(t) {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c == '~' || !roomByte(c) {
			return false
		}
	}
	return true
}

// Reserved reports whether t is an event type a publisher may not use: the frames
// the gateway sends itself (resync, reauth, a stream's anchor and an expired event's
// marker, in any case, so that no client that compares names loosely mistakes an
// event for one), and the events EventSource dispatches on its own ("error" and
// "open"), which a listener could not tell apart from the connection's. "message" is
// not reserved: it is the default type.
func Reserved(t string) bool {
	return t == "error" || t == "open" || strings.EqualFold(t, "resync") || strings.EqualFold(t, "reauth") ||
		strings.EqualFold(t, "anchor") || strings.EqualFold(t, ExpiredType)
}

func roomByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '~' || c == '-'
}
