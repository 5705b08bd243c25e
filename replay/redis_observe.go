package replay

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// RedisOp names a kind of call a RedisLog makes to Redis, for ObserveCalls.
type RedisOp int32

const (
	// OpPublish: the group commit's flushes of single Appends, and their retries.
	OpPublish RedisOp = iota + 1
	// OpBatch: the pipelined flush of an AppendBatch.
	OpBatch
	// OpSince: reads of a room's log and head (Since, Head).
	OpSince
	// OpSubscribe: room subscriptions, from Subscribe to the confirmation, their
	// SUNSUBSCRIBE, and subscriptions lost (an error only).
	OpSubscribe
	// OpHealth: the health check's PING to each node.
	OpHealth
	// OpTicket: stream tickets put and taken.
	OpTicket
	// OpRevoke: revocations written and read, and their notice subscription.
	OpRevoke
	// OpOccupancy: the fleet-wide room occupancy records.
	OpOccupancy
	// OpOwner: client ownership claims, refreshes, releases and reads, and pod
	// notices sent.
	OpOwner

	// NumRedisOps bounds the values above, for arrays indexed by RedisOp.
	NumRedisOps
)

// RedisOps lists every op, for metric registration.
var RedisOps = []RedisOp{OpPublish, OpBatch, OpSince, OpSubscribe, OpHealth, OpTicket, OpRevoke, OpOccupancy, OpOwner}

func (o RedisOp) String() string {
	switch o {
	case OpPublish:
		return "publish"
	case OpBatch:
		return "batch"
	case OpSince:
		return "since"
	case OpSubscribe:
		return "subscribe"
	case OpHealth:
		return "health"
	case OpTicket:
		return "ticket"
	case OpRevoke:
		return "revoke"
	case OpOccupancy:
		return "occupancy"
	case OpOwner:
		return "owner"
	}
	return "unknown"
}

// CallObserver hears of one Redis call: its op, how long it took, and its error
// (nil when it succeeded; a nil reply is no error). A negative took means the call
// has no duration worth measuring (a subscription that ended after living for
// hours): only its error counts. It runs on the caller's goroutine, sometimes on a
// connection's reader: it must be fast and must not block.
type CallObserver func(op RedisOp, took time.Duration, err error)

// ObserveCalls sets the log's call observer, replacing any previous one; nil
// removes it. It may be called at any time.
func (l *RedisLog) ObserveCalls(fn CallObserver) {
	if fn == nil {
		l.calls.Store(nil)
		return
	}
	l.calls.Store(&fn)
}

// observe reports one call that began at start. Errors of calls cut short by Close
// are not reported: they say nothing about Redis.
func (l *RedisLog) observe(op RedisOp, start time.Time, err error) {
	fn := l.calls.Load()
	if fn == nil {
		return
	}
	if err != nil && (rueidis.IsRedisNil(err) || l.life.Err() != nil) {
		if l.life.Err() != nil {
			return
		}
		err = nil
	}
	took := time.Duration(-1)
	if !start.IsZero() {
		took = time.Since(start)
	}
	(*fn)(op, took, err)
}

// do is client.Do, observed as op: the one place a single command is sent.
func (l *RedisLog) do(ctx context.Context, op RedisOp, c rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	start := time.Now()
	res := c.Do(ctx, cmd)
	l.observe(op, start, callerGone(ctx, res.Error()))
	return res
}

// callerGone is err, or nil when err is the cancellation of ctx: a call its caller
// gave up on (a client that went away) says nothing about Redis. A deadline that
// passed is still an error.
func callerGone(ctx context.Context, err error) error {
	if err != nil && errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return err
}

// doMulti is client.DoMulti, observed as one call of op: its error is the first of
// its results'.
func (l *RedisLog) doMulti(ctx context.Context, op RedisOp, c rueidis.Client, cmds ...rueidis.Completed) []rueidis.RedisResult {
	start := time.Now()
	res := c.DoMulti(ctx, cmds...)
	l.observe(op, start, callerGone(ctx, firstErr(res)))
	return res
}

func firstErr(res []rueidis.RedisResult) error {
	for _, r := range res {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
	}
	return nil
}
