package replay

import (
	"context"
	"sync"
)

// flight shares one backend call among concurrent identical requests (same key),
// like singleflight, with one difference that matters for a log: a caller never gets
// the result of a call that started before it arrived. A caller that finds a call
// running waits for the next one, which starts as soon as the running one ends and
// is shared by everyone who arrived meanwhile. So a reader that was rung for seq n
// and then asks gets an answer that includes n, and a storm of N identical reads
// costs at most two calls in sequence instead of N.
//
// The call runs on its own goroutine, detached from every caller's context (a caller
// that gives up does not cancel it for the others); fn must bound itself.
type flight[T any] struct {
	mu    sync.Mutex
	calls map[string]*flightKey[T]
}

type flightKey[T any] struct {
	running *flightCall[T]
	next    *flightCall[T] // shared by callers that arrived while running ran
}

type flightCall[T any] struct {
	done    chan struct{}
	val     T
	err     error
	callers int // guarded by flight.mu
}

// do returns fn's result from a call that started no earlier than this one. spawn
// starts the goroutine that runs calls; when it refuses (the log is closed), do
// returns ErrClosed.
func (f *flight[T]) do(ctx context.Context, key string, spawn func(func()) bool, fn func() (T, error)) (T, error) {
	var zero T
	f.mu.Lock()
	if f.calls == nil {
		f.calls = make(map[string]*flightKey[T])
	}
	k := f.calls[key]
	if k == nil {
		k = &flightKey[T]{}
		f.calls[key] = k
	}
	var c *flightCall[T]
	switch {
	case k.running == nil:
		c = &flightCall[T]{done: make(chan struct{})}
		k.running = c
		if !spawn(func() { f.run(key, k, fn) }) {
			delete(f.calls, key)
			f.mu.Unlock()
			return zero, ErrClosed
		}
	case k.next != nil:
		c = k.next
	default:
		c = &flightCall[T]{done: make(chan struct{})}
		k.next = c
	}
	c.callers++
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// run runs k's calls until none is waiting.
func (f *flight[T]) run(key string, k *flightKey[T], fn func() (T, error)) {
	f.mu.Lock()
	c := k.running
	f.mu.Unlock()
	for c != nil {
		c.val, c.err = fn()
		close(c.done)
		f.mu.Lock()
		c, k.next = k.next, nil
		k.running = c
		if c == nil {
			delete(f.calls, key)
		}
		f.mu.Unlock()
	}
}
