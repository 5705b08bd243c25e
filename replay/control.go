package replay

import (
	"context"
	"errors"
	"time"
)

// The control plane of access control: single-use tickets and revocations, shared by
// every pod of a fleet. MemoryLog and RedisLog implement both interfaces.

// ErrTicketUnknown: no such ticket, or it was redeemed already, or it expired.
var ErrTicketUnknown = errors.New("replay: ticket unknown, redeemed or expired")

// Tickets holds single-use tickets for the whole fleet.
type Tickets interface {
	// PutTicket stores value under id for ttl. id is 1 to 128 characters of
	// [A-Za-z0-9_-] (callers pass a digest of the ticket, never the ticket itself);
	// value is at most 64 KiB. Anything else is ErrInvalid.
	PutTicket(ctx context.Context, id string, value []byte, ttl time.Duration) error
	// TakeTicket returns the value stored under id and deletes it in one step, so a
	// ticket is redeemed once across the fleet; ErrTicketUnknown when there is none.
	TakeTicket(ctx context.Context, id string) ([]byte, error)
	// PeekTicket returns the value stored under id and leaves it there, for a check
	// that must not spend the ticket (a HEAD of a stream); ErrTicketUnknown when
	// there is none.
	PeekTicket(ctx context.Context, id string) ([]byte, error)
}

// Revocation refuses a user's (Kind "sub") or one token's (Kind "jti") credentials.
type Revocation struct {
	Kind  string    // "sub" or "jti"
	Value string    // 1 to 256 bytes of valid UTF-8
	At    time.Time // when it was revoked, millisecond precision
	Until time.Time // when it may be forgotten: no credential it refuses outlives it
}

// Revocations records revocations for the whole fleet.
type Revocations interface {
	// Revoke records r for every pod and tells their watchers; ErrInvalid for a kind
	// or value outside the bounds above, or an Until not after At.
	Revoke(ctx context.Context, r Revocation) error
	// WatchRevocations calls fn with every revocation in force, then with each new one
	// from any pod, until ctx ends or the log closes. It returns at once and watches in
	// the background; calls to fn never overlap and fn must not block. A revocation
	// may be reported more than once. A watcher that loses its connection reloads the
	// whole set once it is back, and at least every few seconds in any case, so a
	// missed notice delays a revocation by seconds, never forever.
	WatchRevocations(ctx context.Context, fn func(Revocation))
}
