package replay

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Receipts: a client's last acknowledgement in each room, kept with its ownership
// entry (owners.go) so that every pod of a fleet can tell whether the client took
// an event. The owner's pod records acks in batches (the gateway coalesces them, at
// most about once a second per client); an entry's acks live and die with it: a
// claim starts with none, a release or an expiry forgets them, a refresh keeps them.
// Both logs' control planes implement Receipts (ControlOf).

// Ack is a client's last acknowledgement in one room.
type Ack struct {
	Room string
	ID   Position  // the last id the client processed, with its epoch
	At   time.Time // when the client sent it, millisecond precision
}

// AckRecord is the acks of one client's owning session that one flush records.
type AckRecord struct {
	Client  string
	Session string
	Acks    []Ack // at most one per room; later ones win
}

// Receipts records and reads clients' last acks (see above).
type Receipts interface {
	// RecordAcks stores each record's acks in its client's entry, replacing the
	// room's earlier ack, while the record's session owns the client; a record
	// whose session does not own the client (or whose client has no entry) changes
	// nothing. It returns how many records were stored. An entry holds the acks of
	// at most MaxAckRooms rooms: acks of further rooms are dropped. A batch holds at
	// most MaxAckBatch records; anything out of bounds is ErrInvalid.
	RecordAcks(ctx context.Context, recs []AckRecord) (stored int, err error)
	// ClientAck reports client's live owner and its last ack in room (a zero Ack
	// before the first).
	ClientAck(ctx context.Context, client, room string) (Owner, Ack, bool, error)
}

// Bounds of receipts, the same for every backend.
const (
	// MaxAckRooms bounds the rooms whose acks one entry keeps.
	MaxAckRooms = 256
	// MaxAckBatch bounds the records of one RecordAcks.
	MaxAckBatch = 1000
)

// validAckRecord reports whether r is within the bounds RecordAcks takes.
func validAckRecord(r AckRecord) bool {
	if !ValidClient(r.Client) || !ValidSession(r.Session) || len(r.Acks) == 0 || len(r.Acks) > MaxAckRooms {
		return false
	}
	for _, a := range r.Acks {
		if !ValidRoom(a.Room) || !validAckID(a.ID) || a.At.UnixMilli() <= 0 || a.At.UnixMilli() > maxSinceMS {
			return false
		}
	}
	return true
}

// validAckID reports whether p can be an acknowledged id: an epoch and a seq.
func validAckID(p Position) bool {
	if p.Epoch == "" {
		return false
	}
	q, err := ParsePosition(p.String())
	return err == nil && q == p
}

// encodeAck is an ack as a backend stores it: "<epoch>:<seq> <Unix ms>".
func encodeAck(a Ack) string {
	return a.ID.String() + " " + strconv.FormatInt(a.At.UnixMilli(), 10)
}

// decodeAck reads an encoded ack of room; ok is false for anything encodeAck could
// not have written.
func decodeAck(room, s string) (Ack, bool) {
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return Ack{}, false
	}
	p, err := ParsePosition(s[:i])
	ms, ok := parseTS(s[i+1:])
	if err != nil || !ok || ms > maxSinceMS || !validAckID(p) || p.String() != s[:i] {
		return Ack{}, false
	}
	return Ack{Room: room, ID: p, At: time.UnixMilli(ms)}, true
}

// msTime is t at millisecond precision, as the backends store times.
func msTime(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
