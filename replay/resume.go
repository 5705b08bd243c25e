package replay

import (
	"context"
	"errors"
	"fmt"
)

// Reader is the read side of a Log.
type Reader interface {
	Since(ctx context.Context, room string, after Position, limit int) ([]Event, Position, error)
}

// Read is what ReadOn found after a position.
type Read struct {
	// Events are the events after From, oldest first. Shared: never modify them.
	Events []Event
	// From is the position Events continue: the position asked for or, after a
	// resync, the resync point.
	From Position
	// Head is the room's newest position.
	Head Position
	// Resync reports that the position asked for cannot be continued: the reader
	// resyncs to From.
	Resync bool
	// Fork reports a resync behind the position asked for, in its epoch: the log
	// lost events the reader has seen (a failover before they were replicated), so
	// the reader must move back, which a reader otherwise never does.
	Fork bool
}

// More reports whether the room held events after the last of Events when it was
// read: a reader that wants everything reads on from there. A read cut short by
// any limit, the caller's or the log's own, has more; a read that returned nothing
// has none to continue from.
func (r Read) More() bool {
	n := len(r.Events)
	if n == 0 {
		return false
	}
	last := r.Events[n-1]
	return last.Epoch == r.Head.Epoch && last.Seq < r.Head.Seq
}

// ReadOn reads up to limit events after `after`, like Since, and decides where a
// reader that cannot continue from `after` resyncs to. When after's epoch is gone
// and the new epoch's start is still retained, the resync point is the position
// before the new epoch's first event, and Events continue from there: nothing
// acknowledged in the new epoch is skipped. Otherwise (trimmed, ahead of the head,
// or the new epoch's start trimmed too) it is the head, with no events.
func ReadOn(ctx context.Context, l Reader, room string, after Position, limit int) (Read, error) {
	evs, head, err := l.Since(ctx, room, after, limit)
	if err == nil {
		return Read{Events: evs, From: after, Head: head}, nil
	}
	if !errors.Is(err, ErrGap) {
		return Read{}, err
	}
	if after.Epoch != "" && head.Epoch != "" && head.Epoch != after.Epoch {
		start := Position{Epoch: head.Epoch}
		evs, shead, err := l.Since(ctx, room, start, limit)
		switch {
		case err == nil:
			return Read{Events: evs, From: start, Head: shead, Resync: true}, nil
		case !errors.Is(err, ErrGap):
			return Read{}, fmt.Errorf("replay: read on %q from the start of epoch %s: %w", room, head.Epoch, err)
		}
		head = shead
	}
	fork := after.Epoch != "" && head.Epoch == after.Epoch && head.Seq < after.Seq
	return Read{From: head, Head: head, Resync: true, Fork: fork}, nil
}
