package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// maxSinceLimit bounds one read: a larger limit is cut to it (the caller reads on).
const maxSinceLimit = 10000

type sinceResult struct {
	events []Event
	head   Position
	gap    bool
	bad    bool // the gap is an entry that failed validation
}

// Since implements Log. A limit of zero or less returns no events but still checks
// the position. Concurrent identical calls (room, position, limit) share one read,
// and so share the returned slice: callers must not modify it.
func (l *RedisLog) Since(ctx context.Context, room string, after Position, limit int) ([]Event, Position, error) {
	if l.isClosed.Load() {
		return nil, Position{}, ErrClosed
	}
	if !ValidRoom(room) || (after.Epoch != "" && !validEpoch(after.Epoch)) {
		return nil, Position{}, fmt.Errorf("replay: since %q: %w", room, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return nil, Position{}, fmt.Errorf("replay: since %q: %w", room, err)
	}
	if after.Seq >= MaxSeq {
		// The function takes 15 digits at most, after.Seq+1 included: answer from
		// the head, which no seq ever passes.
		return l.sinceBeyond(ctx, room, after)
	}
	limit = min(max(limit, 0), maxSinceLimit)
	key := room + "\x00" + after.String() + "\x00" + strconv.Itoa(limit)
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	res, err := l.since.Do(cctx, key, l.spawn, func() (sinceResult, error) {
		rctx, rcancel := context.WithTimeout(l.life, l.cfg.Timeout)
		defer rcancel()
		var res sinceResult
		err := l.retry(rctx, true, func(ctx context.Context) error {
			var err error
			res, err = decodeSince(l.do(ctx, OpSince, l.client, l.sinceCmd(room, after, limit)), room)
			return err
		})
		if err == nil && res.bad {
			n := l.badEntries.Add(1)
			l.warnRarely(&l.badEntryLog, "malformed log entry: reported as lost history (check who may write room keys)",
				"room", room, "bad_entries", n)
		}
		l.countBadHead(room, err)
		return res, err
	})
	if err != nil {
		return nil, Position{}, fmt.Errorf("replay: since %q: %w", room, l.mapErr(ctx, err))
	}
	if res.gap {
		return nil, res.head, fmt.Errorf("replay: since %q after %s: %w", room, after, ErrGap)
	}
	return res.events, res.head, nil
}

// sinceBeyond answers Since for a position at or past MaxSeq: nothing after it,
// unless it is beyond the head (always, in practice), which is a gap.
func (l *RedisLog) sinceBeyond(ctx context.Context, room string, after Position) ([]Event, Position, error) {
	head, err := l.Head(ctx, room)
	if err != nil {
		return nil, Position{}, fmt.Errorf("replay: since %q: %w", room, err)
	}
	if after.Seq == head.Seq && (after.Epoch == "" || after.Epoch == head.Epoch) {
		return nil, head, nil
	}
	return nil, head, fmt.Errorf("replay: since %q after %s: %w", room, after, ErrGap)
}

func (l *RedisLog) sinceCmd(room string, after Position, limit int) rueidis.Completed {
	return l.client.B().FcallRo().Function(redisFnSince).Numkeys(2).
		Key(redisSeqKey(room), redisLogKey(room)).
		Arg(after.Epoch, strconv.FormatUint(after.Seq, 10), strconv.FormatUint(after.Seq+1, 10), strconv.Itoa(limit)).
		Build()
}

// decodeSince reads the since function's answer: {head epoch, head seq, gap,
// entries}, each entry {"<seq>-0", [field, value, ...]}.
func decodeSince(res rueidis.RedisResult, room string) (sinceResult, error) {
	arr, err := res.ToArray()
	if err != nil {
		return sinceResult{}, err
	}
	if len(arr) != 4 {
		return sinceResult{}, fmt.Errorf("since answered %d values, want 4", len(arr))
	}
	epoch, err := arr[0].ToString()
	if err != nil {
		return sinceResult{}, err
	}
	seq, err := arr[1].AsInt64()
	if err != nil {
		return sinceResult{}, err
	}
	gap, err := arr[2].AsInt64()
	if err != nil {
		return sinceResult{}, err
	}
	entries, err := arr[3].ToArray()
	if err != nil {
		return sinceResult{}, err
	}
	if !validHead(epoch, seq) {
		return sinceResult{}, errBadHead
	}
	out := sinceResult{head: Position{Epoch: epoch, Seq: uint64(seq)}, gap: gap != 0}
	if len(entries) > 0 {
		out.events = make([]Event, 0, len(entries))
	}
	prev := uint64(0)
	for _, e := range entries {
		ev, err := decodeEntry(e, room, epoch)
		if err == nil && (ev.Seq <= prev || ev.Seq > out.head.Seq) {
			err = fmt.Errorf("%w: seq %d out of order or past the head %d", errBadEntry, ev.Seq, out.head.Seq)
		}
		if errors.Is(err, errBadEntry) {
			// Never pass it on: the history there is lost to readers.
			return sinceResult{head: out.head, gap: true, bad: true}, nil
		}
		if err != nil {
			return sinceResult{}, err
		}
		prev = ev.Seq
		out.events = append(out.events, ev)
	}
	return out, nil
}

func decodeEntry(e rueidis.RedisMessage, room, epoch string) (Event, error) {
	pair, err := e.ToArray()
	if err != nil || len(pair) != 2 {
		return Event{}, fmt.Errorf("%w: %v", errBadEntry, err)
	}
	id, err := pair[0].ToString()
	if err != nil {
		return Event{}, fmt.Errorf("%w: %v", errBadEntry, err)
	}
	fields, err := pair[1].AsStrSlice()
	if err != nil {
		return Event{}, fmt.Errorf("%w: %v", errBadEntry, err)
	}
	return entryEvent(room, epoch, id, fields)
}

// Head implements Log. Concurrent calls for one room share one read.
func (l *RedisLog) Head(ctx context.Context, room string) (Position, error) {
	if l.isClosed.Load() {
		return Position{}, ErrClosed
	}
	if !ValidRoom(room) {
		return Position{}, fmt.Errorf("replay: head %q: %w", room, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return Position{}, fmt.Errorf("replay: head %q: %w", room, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	head, err := l.head.Do(cctx, room, l.spawn, func() (Position, error) {
		rctx, rcancel := context.WithTimeout(l.life, l.cfg.Timeout)
		defer rcancel()
		var head Position
		err := l.retry(rctx, true, func(ctx context.Context) error {
			var err error
			head, err = decodeHead(l.do(ctx, OpSince, l.client, l.client.B().Hmget().Key(redisSeqKey(room)).Field("epoch", "seq").Build()))
			return err
		})
		l.countBadHead(room, err)
		return head, err
	})
	if err != nil {
		return Position{}, fmt.Errorf("replay: head %q: %w", room, l.mapErr(ctx, err))
	}
	return head, nil
}

// decodeHead reads HMGET epoch seq; a missing hash is the zero Position.
func decodeHead(res rueidis.RedisResult) (Position, error) {
	arr, err := res.ToArray()
	if err != nil {
		return Position{}, err
	}
	if len(arr) != 2 || arr[0].IsNil() || arr[1].IsNil() {
		return Position{}, nil
	}
	epoch, err := arr[0].ToString()
	if err != nil {
		return Position{}, err
	}
	seq, err := arr[1].AsInt64()
	if err != nil {
		return Position{}, err
	}
	if !validHead(epoch, seq) {
		return Position{}, errBadHead
	}
	return Position{Epoch: epoch, Seq: uint64(seq)}, nil
}
