package replay

import (
	"context"
	"fmt"
)

var _ Receipts = (*memOwners)(nil)

// RecordAcks implements Receipts: the acks go into the entry itself.
func (m *memOwners) RecordAcks(ctx context.Context, recs []AckRecord) (int, error) {
	if m.l.closed.Load() {
		return 0, ErrClosed
	}
	if len(recs) > MaxAckBatch {
		return 0, fmt.Errorf("replay: record acks: %d records: %w", len(recs), ErrInvalid)
	}
	for _, r := range recs {
		if !validAckRecord(r) {
			return 0, fmt.Errorf("replay: record acks of client %q: %w", r.Client, ErrInvalid)
		}
	}
	now := m.l.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	stored := 0
	for _, r := range recs {
		cur, ok := m.liveLocked(r.Client, now)
		if !ok || cur.Session != r.Session {
			continue
		}
		if cur.acks == nil {
			cur.acks = make(map[string]Ack, len(r.Acks))
		}
		for _, a := range r.Acks {
			if _, held := cur.acks[a.Room]; held || len(cur.acks) < MaxAckRooms {
				cur.acks[a.Room] = Ack{Room: a.Room, ID: a.ID, At: msTime(a.At)}
			}
		}
		m.entries[r.Client] = cur
		stored++
	}
	return stored, nil
}

// ClientAck implements Receipts.
func (m *memOwners) ClientAck(ctx context.Context, client, room string) (Owner, Ack, bool, error) {
	if m.l.closed.Load() {
		return Owner{}, Ack{}, false, ErrClosed
	}
	if !ValidClient(client) || !ValidRoom(room) {
		return Owner{}, Ack{}, false, fmt.Errorf("replay: client ack %q: %w", client, ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.liveLocked(client, m.l.cfg.Now())
	if !ok {
		return Owner{}, Ack{}, false, nil
	}
	return cur.Owner, cur.acks[room], true, nil
}
