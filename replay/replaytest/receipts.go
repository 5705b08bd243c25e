package replaytest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// The receipts part of the ownership contract (replay.Receipts): a backend's Owners
// records its clients' last acks in their entries.

// receiptsOf returns o's receipts; every backend's Owners keeps them.
func receiptsOf(t *testing.T, o replay.Owners) replay.Receipts {
	t.Helper()
	r, ok := o.(replay.Receipts)
	if !ok {
		t.Fatalf("%T keeps no receipts", o)
	}
	return r
}

// ackAt is the ack of id ("<epoch>:<seq>") in room, sent at.
func ackAt(t *testing.T, room, id string, at time.Time) replay.Ack {
	t.Helper()
	p, err := replay.ParsePosition(id)
	if err != nil {
		t.Fatal(err)
	}
	return replay.Ack{Room: room, ID: p, At: at}
}

// wantAck checks client's last ack in room as r reads it: id sent at (to the
// millisecond), or none when id is "".
func wantAck(t *testing.T, r replay.Receipts, client, room, id string, at time.Time) {
	t.Helper()
	_, a, ok, err := r.ClientAck(context.Background(), client, room)
	if err != nil || !ok {
		t.Fatalf("ack of %s in %s: %v, %v; want an owner", client, room, ok, err)
	}
	if id == "" {
		if a != (replay.Ack{}) {
			t.Fatalf("ack of %s in %s: %+v; want none", client, room, a)
		}
		return
	}
	if a.Room != room || a.ID.String() != id || a.At.UnixMilli() != at.UnixMilli() {
		t.Fatalf("ack of %s in %s: %+v; want %s at %d ms", client, room, a, id, at.UnixMilli())
	}
}

func record(t *testing.T, r replay.Receipts, want int, recs ...replay.AckRecord) {
	t.Helper()
	n, err := r.RecordAcks(context.Background(), recs)
	if err != nil || n != want {
		t.Fatalf("record acks: %d, %v; want %d stored", n, err, want)
	}
}

// receipts: the owner's session records acks, which the other pod reads; a later
// ack replaces the room's; another session records nothing; a refresh keeps the
// acks, a takeover starts without them, and a release forgets them.
func receipts(t *testing.T, e OwnersEnv) {
	ctx := context.Background()
	c := client(t)
	ra, rb := receiptsOf(t, e.A), receiptsOf(t, e.B)
	b, p := boots(1)[0], pod(c)
	mustClaim(t, e.A, c, b, "sA", p, time.Minute)
	wantAck(t, rb, c, "inbox.x", "", time.Time{})

	at := time.UnixMilli(1_700_000_000_123)
	record(t, ra, 1, replay.AckRecord{Client: c, Session: "sA", Acks: []replay.Ack{
		ackAt(t, "inbox.x", "e1:4", at), ackAt(t, "orders", "e2:9", at.Add(time.Second))}})
	wantAck(t, rb, c, "inbox.x", "e1:4", at)
	wantAck(t, rb, c, "orders", "e2:9", at.Add(time.Second))
	wantAck(t, rb, c, "alerts", "", time.Time{})

	record(t, rb, 1, replay.AckRecord{Client: c, Session: "sA", Acks: []replay.Ack{ackAt(t, "inbox.x", "e1:7", at.Add(2*time.Second))}})
	record(t, ra, 0, replay.AckRecord{Client: c, Session: "sZ", Acks: []replay.Ack{ackAt(t, "inbox.x", "e1:99", at)}},
		replay.AckRecord{Client: c + "-none", Session: "sA", Acks: []replay.Ack{ackAt(t, "inbox.x", "e1:99", at)}})
	if _, err := refresh(e.A, c, b, "sA", p, time.Minute); err != nil {
		t.Fatal(err)
	}
	wantAck(t, ra, c, "inbox.x", "e1:7", at.Add(2*time.Second))
	if o, _, ok, _ := ra.ClientAck(ctx, c+"-none", "inbox.x"); ok {
		t.Fatalf("a client without an entry has owner %+v", o)
	}

	mustClaim(t, e.B, c, b, "sB", p, time.Minute)
	wantAck(t, ra, c, "inbox.x", "", time.Time{})
	record(t, ra, 1, replay.AckRecord{Client: c, Session: "sB", Acks: []replay.Ack{ackAt(t, "inbox.x", "e1:8", at)}})
	if err := e.B.ReleaseClient(ctx, c, "sB"); err != nil {
		t.Fatal(err)
	}
	if o, _, ok, err := ra.ClientAck(ctx, c, "inbox.x"); ok || err != nil {
		t.Fatalf("after the release: %+v, %v, %v; want no owner", o, ok, err)
	}
}

// receiptsRoomBound: an entry keeps the acks of at most MaxAckRooms rooms; those it
// keeps are still updated.
func receiptsRoomBound(t *testing.T, e OwnersEnv) {
	c := client(t)
	r := receiptsOf(t, e.A)
	mustClaim(t, e.A, c, boots(1)[0], "sA", pod(c), time.Minute)
	at := time.UnixMilli(1_700_000_000_000)
	acks := make([]replay.Ack, 0, replay.MaxAckRooms)
	for i := range replay.MaxAckRooms {
		acks = append(acks, ackAt(t, fmt.Sprintf("r%d", i), "e:1", at))
	}
	record(t, r, 1, replay.AckRecord{Client: c, Session: "sA", Acks: acks})
	record(t, r, 1, replay.AckRecord{Client: c, Session: "sA", Acks: []replay.Ack{
		ackAt(t, "one-too-many", "e:1", at), ackAt(t, "r0", "e:2", at)}})
	wantAck(t, r, c, "one-too-many", "", time.Time{})
	wantAck(t, r, c, "r0", "e:2", at)
}

// receiptsValidate: records out of bounds are ErrInvalid and store nothing.
func receiptsValidate(t *testing.T, e OwnersEnv) {
	c := client(t)
	r := receiptsOf(t, e.A)
	mustClaim(t, e.A, c, boots(1)[0], "sA", pod(c), time.Minute)
	at := time.UnixMilli(1_700_000_000_000)
	good := ackAt(t, "inbox.x", "e:1", at)
	bad := []replay.AckRecord{
		{Client: c, Session: "sA"},
		{Client: c, Session: "s A", Acks: []replay.Ack{good}},
		{Client: "bad client", Session: "sA", Acks: []replay.Ack{good}},
		{Client: c, Session: "sA", Acks: []replay.Ack{{Room: "inbox.x", ID: replay.Position{Seq: 1}, At: at}}},
		{Client: c, Session: "sA", Acks: []replay.Ack{{Room: "bad room", ID: good.ID, At: at}}},
		{Client: c, Session: "sA", Acks: []replay.Ack{{Room: "inbox.x", ID: good.ID}}},
	}
	for i, rec := range bad {
		if n, err := r.RecordAcks(context.Background(), []replay.AckRecord{rec}); !errors.Is(err, replay.ErrInvalid) || n != 0 {
			t.Errorf("record %d (%+v): %d, %v; want ErrInvalid", i, rec, n, err)
		}
	}
	if _, err := r.RecordAcks(context.Background(), make([]replay.AckRecord, replay.MaxAckBatch+1)); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("a batch over MaxAckBatch: %v; want ErrInvalid", err)
	}
	if _, _, _, err := r.ClientAck(context.Background(), c, "bad room"); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("ClientAck of a bad room: %v; want ErrInvalid", err)
	}
	wantAck(t, r, c, "inbox.x", "", time.Time{})
}
