package replay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Pod notices in Redis: one shard channel per pod, under "room:", the prefix a
// pod's ACL grants, and never among a room's keys:
//
//	room:pod:{<pod>}  shard channel: notices to one pod
//
// A notice is sent once (SPUBLISH) and lost when nobody listens. Notices read back
// that fail validation are counted with the malformed ownership entries
// (RedisStats.BadOwners).

// redisPodChannel is a pod's notice channel; pod must have passed ValidPodID.
func redisPodChannel(pod string) string { return "room:pod:{" + pod + "}" }

var _ Notices = (*redisNotices)(nil)

// redisNotices is a RedisLog's pod notices (Notices), on the log's client: the
// pods it listens for.
type redisNotices struct {
	l *RedisLog

	mu        sync.Mutex
	listening map[string]bool
}

// NotifyPod implements Notices: SPUBLISH on the pod's shard channel, not repeated
// when its outcome is unknown.
func (rn *redisNotices) NotifyPod(ctx context.Context, pod, notice string) error {
	l := rn.l
	if l.isClosed.Load() {
		return ErrClosed
	}
	if !ValidPodID(pod) || !validNotice(notice) {
		return fmt.Errorf("replay: notify pod %q: %w", pod, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: notify pod %q: %w", pod, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.retry(cctx, false, func(ctx context.Context) error {
		return l.do(ctx, OpOwner, l.client, l.client.B().Spublish().Channel(redisPodChannel(pod)).Message(notice).Build()).Error()
	})
	if err != nil {
		return fmt.Errorf("replay: notify pod %q: %w", pod, l.mapErr(ctx, err))
	}
	return nil
}

// PodNotices implements Notices: one SSUBSCRIBE on the pod's shard channel, held
// like a room's (subscribed again after a failover, slot move or lost connection;
// notices sent meanwhile are lost) and ended with SUNSUBSCRIBE. fn runs on the
// caller's goroutine. Close waits for it to return.
func (rn *redisNotices) PodNotices(ctx context.Context, pod string, fn func(notice string)) error {
	l := rn.l
	if !ValidPodID(pod) {
		return fmt.Errorf("replay: pod notices %q: %w", pod, ErrInvalid)
	}
	rn.mu.Lock()
	if rn.listening[pod] {
		rn.mu.Unlock()
		return fmt.Errorf("replay: pod notices %q: already listening: %w", pod, ErrInvalid)
	}
	if rn.listening == nil {
		rn.listening = make(map[string]bool)
	}
	rn.listening[pod] = true
	rn.mu.Unlock()
	defer func() {
		rn.mu.Lock()
		delete(rn.listening, pod)
		rn.mu.Unlock()
	}()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.wg.Add(1)
	l.mu.Unlock()
	defer l.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.life, cancel)()
	channel := redisPodChannel(pod)
	onMessage := func(m rueidis.PubSubMessage) {
		if !validNotice(m.Message) {
			l.owners.badOwner("pod notice")
			return
		}
		fn(m.Message)
	}
	// Canceling Receive only stops local delivery: unless the whole log closes
	// (dropping its connections), unsubscribe on the connection that held it.
	onReturn := func(err error, c rueidis.CommandClient) error {
		if ctx.Err() == nil || l.life.Err() != nil {
			return err
		}
		uctx, ucancel := context.WithTimeout(context.Background(), l.cfg.Timeout)
		defer ucancel()
		if uerr := c.Do(uctx, c.B().Sunsubscribe().Channel(channel).Build()).Error(); uerr != nil {
			l.cfg.Logger.Debug("pod notice sunsubscribe failed", "pod", pod, "err", uerr)
		}
		return err
	}
	delay := subRetryMin
	for ctx.Err() == nil {
		if l.connected.Load() {
			var confirmed atomic.Bool
			rctx := rueidis.WithOnSubscriptionHook(ctx, func(p rueidis.PubSubSubscription) {
				if p.Kind == "ssubscribe" && p.Channel == channel {
					confirmed.Store(true)
				}
			})
			rctx = rueidis.WithOnReceiveReturnHook(rctx, onReturn)
			err := l.client.Receive(rctx, l.client.B().Ssubscribe().Channel(channel).Build(), onMessage)
			if ctx.Err() != nil {
				break
			}
			if confirmed.Load() {
				delay = subRetryMin
			}
			l.cfg.Logger.Debug("pod notice subscription ended; subscribing again", "pod", pod, "err", err)
		}
		t := time.NewTimer(jitter(delay))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = min(delay*2, subRetryMax)
	}
	if l.isClosed.Load() {
		return ErrClosed
	}
	return nil
}
