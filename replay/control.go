package replay

import (
	"context"
	"errors"
	"time"
)

// Control is a pod's control plane: the stores, beside the history, that the pods
// of a fleet share. Each is a small interface of its own, with one implementation
// over each Log backend; ControlOf returns the ones that share a log's backend.
type Control struct {
	Tickets     Tickets      // single-use tickets (access control)
	Revocations Revocations  // revoked users and tokens (access control)
	Occupancy   Occupancy    // each pod's member count of each room it holds
	Owners      Owners       // which connection owns each WebSocket client id
	Notices     Notices      // short notices to one pod (close a displaced client)
	Pods        Pods         // which live process holds each pod id (pods.go)
	Receipts    Receipts     // each client's last ack per room, with its owner (receipts.go)
	Streams     FleetStreams // each pod's open connections (streams.go)
}

// ControlOf returns the control plane that shares log's backend, and false for a
// Log that is neither a MemoryLog nor a RedisLog nor wraps one. A Log that wraps
// another says so with a method Unwrap() Log, and has the control plane of the one
// it wraps. A RedisLog's stores use its one client (its connections, connection
// state, retries and call observer), keep their keys beside the rooms' under
// "room:", and stop with the log's Close; a MemoryLog's are the pod's own, in
// memory, on its clock, and stop with it too. Every call for one log returns the
// same stores.
func ControlOf(log Log) (Control, bool) {
	for {
		switch l := log.(type) {
		case *RedisLog:
			return Control{Tickets: l.tickets, Revocations: l.revs, Occupancy: l.occ, Owners: l.owners, Notices: l.notices, Pods: l.pods, Receipts: l.owners, Streams: l.streams}, true
		case *MemoryLog:
			return Control{Tickets: l.tickets, Revocations: l.revs, Occupancy: l.occ, Owners: l.owners, Notices: l.notices, Pods: l.pods, Receipts: l.owners, Streams: l.streams}, true
		case interface{ Unwrap() Log }:
			if log = l.Unwrap(); log != nil {
				continue
			}
		}
		return Control{}, false
	}
}

// The control plane of access control: single-use tickets and revocations, shared by
// every pod of a fleet.

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
