package replay

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// Receipts in Redis: each ack is the field ack:<room> of the client's entry,
// room:client:{<client>}, "<epoch>:<seq> <Unix ms>", written by the library's
// function roomcast_v1_acks while the session owns the client (one key per call, so
// it works on a cluster); a batch is one pipeline. ClientAck reads the owner and
// the room's ack with one HMGET.
const redisFnAcks = "roomcast_v1_acks"

var _ Receipts = (*redisOwners)(nil)

// RecordAcks implements Receipts with one roomcast_v1_acks per record, pipelined;
// repeating it is safe (the same acks again), so it is retried.
func (ro *redisOwners) RecordAcks(ctx context.Context, recs []AckRecord) (int, error) {
	l := ro.l
	if l.isClosed.Load() {
		return 0, ErrClosed
	}
	if len(recs) > MaxAckBatch {
		return 0, fmt.Errorf("replay: record acks: %d records: %w", len(recs), ErrInvalid)
	}
	type call struct {
		key  string
		args []string
	}
	calls := make([]call, 0, len(recs))
	for _, r := range recs {
		if !validAckRecord(r) {
			return 0, fmt.Errorf("replay: record acks of client %q: %w", r.Client, ErrInvalid)
		}
		args := make([]string, 0, 1+2*len(r.Acks))
		args = append(args, r.Session)
		for _, a := range r.Acks {
			args = append(args, a.Room, encodeAck(a))
		}
		calls = append(calls, call{key: redisClientKey(r.Client), args: args})
	}
	if len(calls) == 0 {
		return 0, nil
	}
	if err := l.usable(); err != nil {
		return 0, fmt.Errorf("replay: record acks: %w", err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	stored := 0
	err := l.retry(cctx, true, func(ctx context.Context) error {
		stored = 0
		// rueidis recycles a command once it has run: every attempt builds its own
		// (a retry that sent the first attempt's commands again panicked).
		cmds := make(rueidis.Commands, len(calls))
		for i, c := range calls {
			cmds[i] = l.client.B().Fcall().Function(redisFnAcks).Numkeys(1).Key(c.key).Arg(c.args...).Build()
		}
		for _, res := range l.doMulti(ctx, OpOwner, l.client, cmds...) {
			n, err := res.AsInt64()
			if err != nil {
				return err
			}
			stored += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("replay: record acks: %w", l.mapErr(ctx, err))
	}
	return stored, nil
}

// ClientAck implements Receipts with HMGET.
func (ro *redisOwners) ClientAck(ctx context.Context, client, room string) (Owner, Ack, bool, error) {
	if !ValidRoom(room) {
		return Owner{}, Ack{}, false, fmt.Errorf("replay: client ack %q: %w", client, ErrInvalid)
	}
	o, f, ok, err := ro.read(ctx, client, "ack:"+room)
	if err != nil || !ok {
		return Owner{}, Ack{}, false, err
	}
	if f[0] == "" {
		return o, Ack{}, true, nil
	}
	a, good := decodeAck(room, f[0])
	if !good {
		ro.badOwner("client ack")
	}
	return o, a, true, nil
}
