package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Occupancy in Redis: one hash per room, in the room's slot,
//
//	room:{<room>}:pods  hash: pod id → "<members> <expires> <updated>" (Unix ms,
//	                    Redis's clock), expiring with its last record in force
//
// written by the roomcast_v1_occupancy function and read by
// roomcast_v1_occupancy_read (roomcast.lua), so that every time is the room's
// node's clock, never a pod's.
const (
	redisFnOccupancy     = "roomcast_v1_occupancy"
	redisFnOccupancyRead = "roomcast_v1_occupancy_read"
)

func redisPodsKey(room string) string { return "room:{" + room + "}:pods" }

// redisOccupancy is a RedisLog's occupancy records (Occupancy), on the log's client.
type redisOccupancy struct {
	l *RedisLog

	badLog atomic.Int64 // when a malformed record was last logged, Unix ns
}

var _ Occupancy = (*redisOccupancy)(nil)

// SetOccupancy implements Occupancy: one function call per count, pipelined (rueidis
// sends each node its calls in one round trip). Calls are repeated, within the
// log's Timeout, until each has succeeded once: a record is safe to write again.
func (ro *redisOccupancy) SetOccupancy(ctx context.Context, pod string, ttl time.Duration, counts []RoomCount) error {
	l := ro.l
	if l.isClosed.Load() {
		return ErrClosed
	}
	if !validOccupancy(pod, ttl, counts) {
		return fmt.Errorf("replay: set occupancy: %w", ErrInvalid)
	}
	if len(counts) == 0 {
		return nil
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: set occupancy: %w", err)
	}
	ms := strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)
	pending := counts
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.retry(cctx, true, func(ctx context.Context) error {
		// rueidis recycles a command once it has run: every attempt builds its own.
		cmds := make(rueidis.Commands, len(pending))
		for i, c := range pending {
			cmds[i] = l.client.B().Fcall().Function(redisFnOccupancy).Numkeys(1).Key(redisPodsKey(c.Room)).
				Arg(pod, strconv.Itoa(c.Members), ms).Build()
		}
		var errs []error
		var failed []RoomCount
		for i, res := range l.doMulti(ctx, OpOccupancy, l.client, cmds...) {
			if err := res.Error(); err != nil {
				errs = append(errs, err)
				failed = append(failed, pending[i])
			}
		}
		pending = failed
		if len(failed) == 0 {
			return nil
		}
		return worstOf(errs)
	})
	if err != nil {
		return fmt.Errorf("replay: set occupancy of %d rooms: %w", len(counts), l.mapErr(ctx, err))
	}
	return nil
}

// readRecords calls fn, a read of the pods' records in the hash key that answers
// {server time in Unix ms, the records as HGETALL gives them}, once.
func (l *RedisLog) readRecords(ctx context.Context, fn, key string) (now int64, fields []string, err error) {
	cmd := l.client.B().FcallRo().Function(fn).Numkeys(1).Key(key).Build()
	arr, err := l.do(ctx, OpOccupancy, l.client, cmd).ToArray()
	if err != nil {
		return 0, nil, err
	}
	if len(arr) != 2 {
		return 0, nil, fmt.Errorf("%s answered %d values, want 2", fn, len(arr))
	}
	if now, err = arr[0].AsInt64(); err != nil {
		return 0, nil, err
	}
	fields, err = arr[1].AsStrSlice()
	return now, fields, err
}

// worstOf picks, among errors of one pipelined batch, the one that decides whether
// what is left of the batch is repeated: a definite failure stops it, a node that
// lacks the library has it loaded, anything else is repeated.
func worstOf(errs []error) error {
	for _, want := range []failure{failOther, failFull, failDeadline, failNoFunction, failUnknown, failNotRun} {
		for _, err := range errs {
			if classify(err) == want {
				return err
			}
		}
	}
	return errors.Join(errs...)
}

// Occupancy implements Occupancy. A malformed record (someone else wrote room: keys)
// is skipped, and logged at most once a minute.
func (ro *redisOccupancy) Occupancy(ctx context.Context, room string) ([]PodCount, error) {
	l := ro.l
	if l.isClosed.Load() {
		return nil, ErrClosed
	}
	if !ValidRoom(room) {
		return nil, fmt.Errorf("replay: occupancy %q: %w", room, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return nil, fmt.Errorf("replay: occupancy %q: %w", room, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var pods []PodCount
	err := l.retry(cctx, true, func(ctx context.Context) error {
		now, fields, err := l.readRecords(ctx, redisFnOccupancyRead, redisPodsKey(room))
		if err != nil {
			return err
		}
		var bad int
		pods, bad = livePods(fields, now)
		if bad > 0 {
			l.warnRarely(&ro.badLog, "malformed occupancy record skipped (check who may write room: keys)", "records", bad)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay: occupancy %q: %w", room, l.mapErr(ctx, err))
	}
	return pods, nil
}
