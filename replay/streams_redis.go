package replay

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// Open connections per pod in Redis: one hash for the fleet, in one slot, so one
// call reads every pod's record without KEYS or SCAN,
//
//	room:fleet:{streams}  hash: pod id → "<streams> <expires> <updated>" (Unix ms,
//	                      Redis's clock), expiring with its last record in force
//
// written by roomcast_v1_streams and read by roomcast_v1_streams_read
// (roomcast.lua). Each pod writes it once per occupancy interval. Calls are counted
// as OpOccupancy: they say which pods hold what.
const (
	redisFnStreams     = "roomcast_v1_streams"
	redisFnStreamsRead = "roomcast_v1_streams_read"
	redisStreamsKey    = "room:fleet:{streams}"
)

// redisStreams is a RedisLog's records of its pods' open connections
// (FleetStreams), on the log's client.
type redisStreams struct {
	l *RedisLog

	badLog atomic.Int64 // when a malformed record was last logged, Unix ns
}

var _ FleetStreams = (*redisStreams)(nil)

// SetStreams implements FleetStreams; a record is safe to write again, so the call
// is retried within the log's Timeout.
func (rs *redisStreams) SetStreams(ctx context.Context, pod string, streams int, ttl time.Duration) error {
	if !validStreams(pod, streams, ttl) {
		return fmt.Errorf("replay: set streams: %w", ErrInvalid)
	}
	return rs.write(ctx, pod, streams, max(ttl.Milliseconds(), 1))
}

// ForgetStreams implements FleetStreams.
func (rs *redisStreams) ForgetStreams(ctx context.Context, pod string) error {
	if !ValidPodID(pod) {
		return fmt.Errorf("replay: forget streams of %q: %w", pod, ErrInvalid)
	}
	return rs.write(ctx, pod, 0, 0)
}

// write calls roomcast_v1_streams; ttlMS 0 forgets pod's record.
func (rs *redisStreams) write(ctx context.Context, pod string, streams int, ttlMS int64) error {
	l := rs.l
	if l.isClosed.Load() {
		return ErrClosed
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: streams of %q: %w", pod, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.retry(cctx, true, func(ctx context.Context) error {
		cmd := l.client.B().Fcall().Function(redisFnStreams).Numkeys(1).Key(redisStreamsKey).
			Arg(pod, strconv.Itoa(streams), strconv.FormatInt(ttlMS, 10)).Build()
		return l.do(ctx, OpOccupancy, l.client, cmd).Error()
	})
	if err != nil {
		return fmt.Errorf("replay: streams of %q: %w", pod, l.mapErr(ctx, err))
	}
	return nil
}

// Streams implements FleetStreams. A malformed record (someone else wrote the key)
// is skipped, and logged at most once a minute.
func (rs *redisStreams) Streams(ctx context.Context) ([]PodStreams, error) {
	l := rs.l
	if l.isClosed.Load() {
		return nil, ErrClosed
	}
	if err := l.usable(); err != nil {
		return nil, fmt.Errorf("replay: fleet streams: %w", err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var out []PodStreams
	err := l.retry(cctx, true, func(ctx context.Context) error {
		now, fields, err := l.readRecords(ctx, redisFnStreamsRead, redisStreamsKey)
		if err != nil {
			return err
		}
		var bad int
		out, bad = liveStreams(fields, now)
		if bad > 0 {
			l.warnRarely(&rs.badLog, "malformed fleet streams record skipped (check who may write room: keys)", "records", bad)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay: fleet streams: %w", l.mapErr(ctx, err))
	}
	return out, nil
}
