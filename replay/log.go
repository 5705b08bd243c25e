package replay

import (
	"context"
	"errors"
)

// Log is a room's sequence authority, bounded history and doorbell. It is the plug
// point between the embedded default (MemoryLog) and a shared backend; every
// implementation passes the same contract suite (replaytest).
type Log interface {
	// Append assigns the room's next seq, stores the event (history trimmed to its
	// bound) and rings the room's doorbell, atomically: no reader can see seq n+1
	// before seq n. With an IdempotencyKey seen inside its TTL it returns the
	// original event's room, epoch and seq (its Body unset) and publishes nothing.
	Append(ctx context.Context, room string, m Message) (Event, error)

	// Since returns up to limit events after `after`, oldest first, and the room's
	// head (the newest position; the zero Position for a room with no history).
	// It returns ErrGap, with the head, when `after` was trimmed away, belongs to
	// another epoch or is ahead of the head: the reader cannot be repaired and must
	// resync from the head. The slice may be shared with concurrent callers: never
	// modify it.
	Since(ctx context.Context, room string, after Position, limit int) ([]Event, Position, error)

	// Head returns the room's newest position without reading history.
	Head(ctx context.Context, room string) (Position, error)

	// Subscribe makes the log call ring for every event appended to room from now
	// on, in seq order, until Unsubscribe. A ring with a zero Event (Seq 0) means
	// "the doorbell may have missed events: read the log". ring must not block: it
	// may run on a connection's reader, where blocking stalls every room on that
	// node. A room has at most one subscriber per Log; a second Subscribe replaces
	// the first. Subscribe returns once the subscription is active, so a history read
	// after it overlaps whatever rings next.
	Subscribe(ctx context.Context, room string, ring func(Event)) error

	// Unsubscribe stops the rings for room.
	Unsubscribe(ctx context.Context, room string) error

	// Close releases the log's resources. Calls after Close return ErrClosed.
	Close(ctx context.Context) error
}

var (
	// ErrGap: the requested position cannot be continued from the log.
	ErrGap = errors.New("replay: position is outside the retained history")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("replay: log closed")
	// ErrFull: the log is at its room or memory bound and takes no new room or event.
	ErrFull = errors.New("replay: log is full")
	// ErrUnavailable: the backend cannot be reached; the caller may retry later.
	ErrUnavailable = errors.New("replay: backend unavailable")
	// ErrOutcomeUnknown: an Append may have run although it failed: the command
	// reached the backend (or may have) and its answer did not come back in time or
	// the connection was lost, or WAIT saw fewer replicas than required (the event is
	// stored, perhaps not durably). Such an error also matches ErrUnavailable; check
	// for ErrOutcomeUnknown first. Retrying with the same IdempotencyKey publishes at
	// most once.
	ErrOutcomeUnknown = errors.New("replay: outcome unknown: the event may have been published")
	// ErrInvalid: the room name, event type or body failed validation.
	ErrInvalid = errors.New("replay: invalid message")
)
