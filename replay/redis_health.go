package replay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Background connection: jittered backoff between attempts, doubling from
// connectRetryMin to connectRetryMax.
const (
	connectRetryMin = 100 * time.Millisecond
	connectRetryMax = 5 * time.Second
)

// Health implements the optional health capability: whether the backend answered
// the last check (a PING to every node the client knows, every HealthInterval; up
// when any answers), and since when.
func (l *RedisLog) Health() Health {
	return *l.health.Load()
}

// Describe names the log's backend for people, for messages that say what cannot
// be reached: "redis at <first seed>", with how many other seeds there are. It never
// holds a credential: a seed's user information, if any, is left out.
func (l *RedisLog) Describe() string {
	if len(l.cfg.Addrs) == 0 {
		return "redis"
	}
	d := "redis at " + hostPort(l.cfg.Addrs[0])
	switch n := len(l.cfg.Addrs) - 1; n {
	case 0:
	case 1:
		d += " and 1 other seed"
	default:
		d += " and " + strconv.Itoa(n) + " other seeds"
	}
	return d
}

// hostPort is a seed without any user information or scheme before its host.
func hostPort(seed string) string {
	if i := strings.LastIndex(seed, "@"); i >= 0 {
		seed = seed[i+1:]
	} else if i := strings.Index(seed, "://"); i >= 0 {
		seed = seed[i+3:]
	}
	return seed
}

// setUp records the backend's reachability and logs every change once: a warning
// when it is lost, info when it is back.
func (l *RedisLog) setUp(up bool, err error) {
	for {
		old := l.health.Load()
		if old.Up == up {
			return
		}
		h := &Health{Kind: old.Kind, Up: up, ChangedAt: time.Now()}
		if !l.health.CompareAndSwap(old, h) {
			continue
		}
		if up {
			l.cfg.Logger.Info("redis backend reachable", "addrs", l.cfg.Addrs, "down_for", h.ChangedAt.Sub(old.ChangedAt).String())
		} else {
			l.cfg.Logger.Warn("redis backend unreachable", "addrs", l.cfg.Addrs, "err", err)
		}
		return
	}
}

// monitor connects in the background until connected, then checks the backend
// every HealthInterval, until Close.
func (l *RedisLog) monitor() {
	defer l.wg.Done()
	delay := connectRetryMin
	for attempts := 1; !l.connected.Load(); attempts++ {
		t := time.NewTimer(jitter(delay))
		select {
		case <-t.C:
		case <-l.life.Done():
			t.Stop()
			return
		}
		delay = min(delay*2, connectRetryMax)
		ctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
		err := l.connect(ctx)
		cancel()
		switch {
		case err == nil || l.life.Err() != nil:
		case errors.Is(err, ErrUnavailable):
			l.cfg.Logger.Debug("redis connect failed", "addrs", l.cfg.Addrs, "attempt", attempts, "err", err)
		default:
			// Reached, but it refused the function library: no retry fixes that
			// by itself, so say so (rarely) while trying on.
			l.warnRarely(&l.connectLog, "redis refused the function library; still trying", "addrs", l.cfg.Addrs, "err", err)
		}
	}
	tick := time.NewTicker(l.cfg.HealthInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			err := l.probe()
			if l.life.Err() != nil {
				return
			}
			l.setUp(err == nil, err)
		case <-l.life.Done():
			return
		}
	}
}

// probe pings every node the client knows, within Timeout; nil when any answers.
func (l *RedisLog) probe() error {
	ctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
	defer cancel()
	var (
		wg      sync.WaitGroup
		up      atomic.Bool
		errOnce sync.Once
		first   error
	)
	for _, c := range l.client.Nodes() {
		wg.Go(func() {
			if err := l.do(ctx, OpHealth, c, c.B().Ping().Build()).Error(); err != nil {
				errOnce.Do(func() { first = err })
				return
			}
			up.Store(true)
		})
	}
	wg.Wait()
	if up.Load() {
		return nil
	}
	if first == nil {
		return ErrUnavailable
	}
	return first
}
