package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/roomcast/roomcast/replay/flight"
)

// failure sorts an error from Redis by what the caller may do about it.
type failure int

const (
	failOther      failure = iota + 1 // a definite answer: return it
	failNotRun                        // the command surely did not run: retry
	failUnknown                       // it may have run: retry only when repeating is safe
	failNoFunction                    // the node does not know the library: load it, retry once
	failFull                          // the node is out of memory
	failDeadline                      // the call's time is up, or its caller gave up
)

func classify(err error) failure {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return failDeadline
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) { // already decided (WAIT saw too few replicas)
		return failOther
	}
	if errors.Is(err, rueidis.ErrNoSlot) {
		return failNotRun
	}
	var rerr *rueidis.RedisError
	if errors.As(err, &rerr) {
		if rerr.IsNil() {
			return failOther
		}
		msg := rerr.Error()
		switch {
		case rerr.IsTryAgain(), rerr.IsClusterDown(), rerr.IsLoading(),
			strings.HasPrefix(msg, "MOVED "), strings.HasPrefix(msg, "ASK "),
			strings.HasPrefix(msg, "MASTERDOWN"), strings.HasPrefix(msg, "READONLY"):
			return failNotRun
		case strings.Contains(msg, "Function not found"):
			return failNoFunction
		case strings.HasPrefix(msg, "OOM"):
			return failFull
		}
		return failOther
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return failNotRun
	}
	// A connection lost or timed out after the command may have been sent.
	return failUnknown
}

// retryable reports whether an Append that failed with err may be sent again; safe
// means it has an idempotency key.
func retryable(err error, safe bool) bool {
	switch classify(err) {
	case failNotRun, failNoFunction:
		return true
	case failUnknown:
		return safe
	}
	return false
}

// mapErr turns a Redis-facing error into the package's sentinels: ErrUnavailable
// for anything that may pass (the underlying error stays wrapped, ErrOutcomeUnknown
// among them when an Append may have run), ErrFull for a node out of memory,
// ErrClosed after Close. parent is the caller's own context: when
// the caller gave up, its error is returned as it is.
func (l *RedisLog) mapErr(parent context.Context, err error) error {
	if errors.Is(err, flight.ErrRefused) || l.isClosed.Load() && (errors.Is(err, rueidis.ErrClosing) || errors.Is(err, context.Canceled)) {
		return ErrClosed // a shared read refused: the log closed
	}
	switch classify(err) {
	case failDeadline:
		if errors.Is(parent.Err(), context.Canceled) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case failNotRun, failUnknown, failNoFunction:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case failFull:
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	if errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// Backoff between retries: jittered, doubling from retryMin to retryMax.
const (
	retryMin = 10 * time.Millisecond
	retryMax = 250 * time.Millisecond
)

func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// retry runs call until it succeeds, fails for good, or ctx has no time left for
// another try. Calls that surely did not run are repeated; calls that may have run
// only when safe. A node that does not know the library gets it loaded, and the call
// is repeated once. The last error is returned.
func (l *RedisLog) retry(ctx context.Context, safe bool, call func(context.Context) error) error {
	delay := retryMin
	reloaded := false
	for {
		err := call(ctx)
		if err == nil {
			return nil
		}
		switch classify(err) {
		case failNoFunction:
			if reloaded {
				return err
			}
			reloaded = true
			if lerr := l.reloadLibrary(ctx); lerr != nil {
				return lerr
			}
			continue
		case failNotRun:
		case failUnknown:
			if !safe {
				return err
			}
		default:
			return err
		}
		if l.isClosed.Load() {
			return err
		}
		d := jitter(delay)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return err
		}
		l.retries.Add(1)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		delay = min(delay*2, retryMax)
	}
}

// reloadLibrary loads the library again on every node, once for all the callers
// that found it missing at about the same time.
func (l *RedisLog) reloadLibrary(ctx context.Context) error {
	_, err := l.load.Do(ctx, "", l.spawn, func() (struct{}, error) {
		l.reloads.Add(1)
		lctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
		defer cancel()
		err := loadLibrary(lctx, l.client, l.cfg.Logger)
		if err == nil {
			l.cfg.Logger.Info("redis function library reloaded", "library", RedisLibrary)
		}
		return struct{}{}, err
	})
	return err
}

// loadLibrary runs FUNCTION LOAD REPLACE on every node the client knows. Replicas
// refuse it (they get the library from their primary), and a node that cannot be
// reached now gets it when it first answers that it does not know the function. It
// fails when no node took the library, or when one answered with any other error.
func loadLibrary(ctx context.Context, client rueidis.Client, logger *slog.Logger) error {
	nodes := client.Nodes()
	var (
		mu     sync.Mutex
		loaded int
		errs   []error
		down   []error
		wg     sync.WaitGroup
	)
	for addr, c := range nodes {
		wg.Go(func() {
			err := c.Do(ctx, c.B().FunctionLoad().Replace().FunctionCode(redisLibrarySource).Build()).Error()
			mu.Lock()
			defer mu.Unlock()
			var rerr *rueidis.RedisError
			switch {
			case err == nil:
				loaded++
			case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "READONLY"):
			case errors.As(err, &rerr):
				errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			default:
				down = append(down, fmt.Errorf("%s: %w", addr, err))
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if loaded == 0 {
		if len(down) > 0 {
			return errors.Join(down...)
		}
		return errors.New("no node took the function library")
	}
	if len(down) > 0 {
		logger.Warn("redis function library not loaded on every node", "library", RedisLibrary, "err", errors.Join(down...))
	}
	return nil
}
