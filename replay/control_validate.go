package replay

import (
	"time"
	"unicode/utf8"
)

// Bounds of the control plane, the same for every backend.
const (
	maxTicketID        = 128      // bytes of [A-Za-z0-9_-]
	maxTicketValue     = 64 << 10 // bytes
	maxTickets         = 100000   // live tickets held by a MemoryLog
	maxTicketBytes     = 64 << 20 // bytes of ticket values held by a MemoryLog
	maxRevocationValue = 256      // bytes
	maxRevocations     = 100000   // revocations in force, per MemoryLog and in Redis
)

// validTicketID reports whether id is 1 to 128 characters of [A-Za-z0-9_-]: safe
// inside a Redis hash tag.
func validTicketID(id string) bool {
	if len(id) == 0 || len(id) > maxTicketID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validTicket checks PutTicket's arguments. A ttl below a millisecond is refused:
// Redis counts expiry in milliseconds.
func validTicket(id string, value []byte, ttl time.Duration) bool {
	return validTicketID(id) && len(value) <= maxTicketValue && ttl >= time.Millisecond
}

// validRevocation checks a revocation, from a caller or read back from Redis.
func validRevocation(r Revocation) bool {
	return (r.Kind == "sub" || r.Kind == "jti") &&
		len(r.Value) > 0 && len(r.Value) <= maxRevocationValue && utf8.ValidString(r.Value) &&
		r.At.UnixMilli() > 0 && r.Until.UnixMilli() > r.At.UnixMilli()
}

// normalRevocation is r at millisecond precision, as every backend stores it.
func normalRevocation(r Revocation) Revocation {
	r.At = time.UnixMilli(r.At.UnixMilli())
	r.Until = time.UnixMilli(r.Until.UnixMilli())
	return r
}
