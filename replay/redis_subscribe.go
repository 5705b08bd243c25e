package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// redisSub is one room's doorbell subscription: a goroutine that keeps an
// SSUBSCRIBE on the room's shard channel alive.
//
// rueidis delivers messages on the goroutine that called Receive (ours) and
// subscription confirmations on the connection's reader goroutine; both end in ring,
// serialised by ringMu, so the caller's ring is never called concurrently and never
// after Unsubscribe returns.
type redisSub struct {
	room    string
	channel string

	ctx    context.Context // canceled by Unsubscribe and Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned

	confirmed chan struct{} // closed at the first subscription confirmation
	once      sync.Once

	ringMu  sync.Mutex
	ring    func(Event)
	stopped bool
	confirm uint64   // confirmations so far
	seen    Position // the newest doorbell heard, for the hot-room check (hot.go)

	quit     atomic.Bool // Unsubscribe has begun: end when Receive returns
	stopping bool        // guarded by RedisLog.mu: the same, seen by Subscribe
}

// Subscribe implements Log. It returns once Redis confirmed the subscription, so an
// event appended after it returns rings. Every later confirmation (after a failover,
// a slot move or a lost connection: events may have been missed meanwhile) rings a
// zero Event. It fails, wrapping ErrUnavailable, when no confirmation comes within
// Timeout.
func (l *RedisLog) Subscribe(ctx context.Context, room string, ring func(Event)) error {
	if !ValidRoom(room) {
		return fmt.Errorf("replay: subscribe %q: %w", room, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: subscribe %q: %w", room, err)
	}
	start := time.Now()
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var s *redisSub
	created := false
	for s == nil {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		old := l.subs[room]
		switch {
		case old != nil && old.stopping:
			// Wait until the previous subscription is gone: its SUNSUBSCRIBE must not
			// cancel the new one.
			l.mu.Unlock()
			select {
			case <-old.done:
			case <-cctx.Done():
				return fmt.Errorf("replay: subscribe %q: %w", room, l.mapErr(ctx, cctx.Err()))
			}
			continue
		case old != nil:
			s = old
			s.ringMu.Lock()
			s.ring = ring
			s.ringMu.Unlock()
		default:
			s = l.newSub(room, ring)
			l.subs[room] = s
			created = true
			l.wg.Add(1)
			go l.receiveLoop(s)
		}
		l.mu.Unlock()
	}
	select {
	case <-s.confirmed:
		l.observe(OpSubscribe, start, nil)
		return nil
	case <-s.done:
		return ErrClosed
	case <-cctx.Done():
		if created {
			l.stopSub(s)
		}
		l.observe(OpSubscribe, start, cctx.Err())
		return fmt.Errorf("replay: subscribe %q: %w", room, l.mapErr(ctx, cctx.Err()))
	}
}

func (l *RedisLog) newSub(room string, ring func(Event)) *redisSub {
	ctx, cancel := context.WithCancel(l.life)
	return &redisSub{
		room:      room,
		channel:   l.subChannel(room),
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
		confirmed: make(chan struct{}),
		ring:      ring,
	}
}

// Unsubscribe implements Log. It stops the room's rings at once, then ends the
// subscription (SUNSUBSCRIBE on the connection that holds it) and waits for its
// goroutine, within Timeout.
func (l *RedisLog) Unsubscribe(ctx context.Context, room string) error {
	l.mu.Lock()
	s := l.subs[room]
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	l.silence(s)
	// SUNSUBSCRIBE through the client goes to the connection that holds the
	// subscription (subscriptions and unsubscriptions share one connection per node)
	// while Receive still reads it: Redis's answer ends Receive, and no message can
	// pile up behind it. Canceling Receive afterwards covers a subscription held on
	// another node (a topology change); onReceiveReturn unsubscribes it there.
	if err := l.do(cctx, OpSubscribe, l.client, l.client.B().Sunsubscribe().Channel(s.channel).Build()).Error(); err != nil {
		l.cfg.Logger.Debug("room sunsubscribe failed", "room", room, "err", err)
	}
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-cctx.Done():
		return fmt.Errorf("replay: unsubscribe %q: %w", room, l.mapErr(ctx, cctx.Err()))
	}
}

// silence stops s's rings and marks it as ending: its goroutine returns the next
// time Receive does.
func (l *RedisLog) silence(s *redisSub) {
	l.mu.Lock()
	s.stopping = true
	l.mu.Unlock()
	s.quit.Store(true)
	s.ringMu.Lock()
	s.stopped = true
	s.ringMu.Unlock()
}

// stopSub silences s and cancels its Receive; it does not wait.
func (l *RedisLog) stopSub(s *redisSub) {
	l.silence(s)
	s.cancel()
}

// Resubscription backoff: jittered, doubling from subRetryMin to subRetryMax, back
// to the minimum after every confirmed subscription.
const (
	subRetryMin = 50 * time.Millisecond
	subRetryMax = 2 * time.Second
)

// receiveLoop keeps s subscribed until it is stopped. Receive blocks while the
// subscription lives; it returns nil when Redis ends the subscription (an
// sunsubscribe push after a failover or slot move) and an error when the connection
// is lost or the node does not serve the slot. Either way: subscribe again, on
// whatever node serves the slot now.
func (l *RedisLog) receiveLoop(s *redisSub) {
	defer l.wg.Done()
	defer func() {
		l.mu.Lock()
		if l.subs[s.room] == s {
			delete(l.subs, s.room)
		}
		l.mu.Unlock()
		close(s.done)
	}()
	delay := subRetryMin
	failures := 0 // since the last confirmation: only the first is a warning
	for {
		before := s.confirmations()
		ctx := rueidis.WithOnSubscriptionHook(s.ctx, s.onSubscription(l))
		ctx = rueidis.WithOnReceiveReturnHook(ctx, l.onReceiveReturn(s))
		err := l.client.Receive(ctx, l.client.B().Ssubscribe().Channel(s.channel).Build(), s.onMessage(l))
		if s.quit.Load() || s.ctx.Err() != nil {
			return
		}
		l.observe(OpSubscribe, time.Time{}, err)
		if s.confirmations() != before {
			delay, failures = subRetryMin, 0
		}
		switch {
		case err == nil:
			l.cfg.Logger.Debug("room subscription ended by the server", "room", s.room)
		case failures == 0 && !isRedirect(err):
			l.cfg.Logger.Warn("room subscription lost", "room", s.room, "err", err)
		default:
			l.cfg.Logger.Debug("room subscription still failing", "room", s.room, "err", err)
		}
		if err != nil {
			failures++
		}
		t := time.NewTimer(jitter(delay))
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
		delay = min(delay*2, subRetryMax)
	}
}

// isRedirect reports a MOVED or ASK answer: expected while a slot moves, until the
// client's view of the cluster catches up.
func isRedirect(err error) bool {
	var rerr *rueidis.RedisError
	if !errors.As(err, &rerr) {
		return false
	}
	_, moved := rerr.IsMoved()
	_, ask := rerr.IsAsk()
	return moved || ask
}

func (s *redisSub) confirmations() uint64 {
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	return s.confirm
}

// onSubscription returns the confirmation hook. It runs on the connection's reader
// goroutine, so it only signals and rings.
func (s *redisSub) onSubscription(l *RedisLog) func(rueidis.PubSubSubscription) {
	return func(p rueidis.PubSubSubscription) {
		if p.Kind != "ssubscribe" || p.Channel != s.channel {
			return
		}
		s.ringMu.Lock()
		s.confirm++
		if s.confirm > 1 {
			l.resubscribes.Add(1)
			if !s.stopped {
				s.ring(Event{})
			}
		}
		s.ringMu.Unlock()
		s.once.Do(func() { close(s.confirmed) })
	}
}

// onMessage returns the message callback: decode, ring, nothing else. A message
// that does not decode or validate rings a zero Event, so the reader goes to the log.
func (s *redisSub) onMessage(l *RedisLog) func(rueidis.PubSubMessage) {
	return func(m rueidis.PubSubMessage) {
		ev, ok := decodeDoorbell(s.room, m.Message)
		if !ok {
			n := l.badMessages.Add(1)
			l.warnRarely(&l.badMessageLog, "malformed doorbell ignored; reading the log instead (check who may SPUBLISH to room channels)",
				"room", s.room, "bad_messages", n)
			ev = Event{}
		}
		s.ringMu.Lock()
		if ev.Seq != 0 && (ev.Epoch != s.seen.Epoch || ev.Seq > s.seen.Seq) {
			s.seen = ev.Position()
		}
		if !s.stopped {
			s.ring(ev)
		}
		s.ringMu.Unlock()
	}
}

// onReceiveReturn returns the hook rueidis calls as Receive returns, with the
// connection that held the subscription. Canceling Receive only stops local
// delivery; when the room is being unsubscribed (not when the whole log closes, which
// drops the connections) it sends SUNSUBSCRIBE on that connection so that Redis
// stops sending too.
func (l *RedisLog) onReceiveReturn(s *redisSub) func(error, rueidis.CommandClient) error {
	return func(err error, c rueidis.CommandClient) error {
		if s.ctx.Err() == nil || l.life.Err() != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
		defer cancel()
		if uerr := c.Do(ctx, c.B().Sunsubscribe().Channel(s.channel).Build()).Error(); uerr != nil {
			l.cfg.Logger.Warn("room sunsubscribe failed", "room", s.room, "err", uerr)
		}
		return err
	}
}
