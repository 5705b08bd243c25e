// Package flight shares one call among concurrent identical requests, like
// golang.org/x/sync/singleflight, with one difference that matters to a reader of
// something that changes: a caller never gets the result of a call that started
// before it arrived.
//
// A caller that finds no call running for its key starts one. A caller that finds
// one running waits for the next call of that key, which starts as soon as the
// running one ends and is shared by every caller that arrived meanwhile. So a reader
// that was told "seq n exists" and then asks gets an answer that includes n, and a
// storm of N identical requests costs at most two calls in sequence, never N.
//
// Calls run on their own goroutine, detached from every caller's context: a caller
// that gives up returns at once and does not cancel the call for the others, so fn
// must bound itself (a timeout of its own). The goroutine is started by the spawn
// function the caller passes (one that a Close can wait for, say), or by a plain go
// statement when spawn is nil.
//
// It imports only the standard library.
package flight

import (
	"context"
	"errors"
	"sync"
)

// ErrRefused is what Do returns when spawn refused to start the call (its owner is
// closing, say); nothing ran.
var ErrRefused = errors.New("flight: call refused")

// Group shares calls among the callers of each key. The zero Group is ready to use;
// a Group must not be copied after first use. It is safe for concurrent use. Its
// lock is a leaf: fn and spawn run without it.
type Group[T any] struct {
	mu    sync.Mutex
	calls map[string]*keyCalls[T]

	// joined, when set, runs under mu each time a caller joins a call (tests only):
	// next reports whether it waits for the next call rather than starting one.
	joined func(key string, next bool)
}

// keyCalls is one key's running call and the call queued behind it.
type keyCalls[T any] struct {
	running *call[T]
	next    *call[T] // shared by the callers that arrived while running ran
}

type call[T any] struct {
	fn   func() (T, error) // what the caller that made the call asked to run
	done chan struct{}     // closed once val and err are set
	val  T
	err  error
}

// Do returns the result of fn, or of the fn of another caller of key, from a call
// that started no earlier than Do was called. The callers of one key must ask the
// same thing: whichever of their fns runs answers for all of them.
//
// spawn starts, on a new goroutine, the function that runs key's calls (every call
// queued behind the first, then it returns); when spawn returns false, Do returns
// ErrRefused. A nil spawn starts it with a go statement. fn must not panic. When ctx ends first, Do returns ctx.Err() and the
// call goes on for the others. Callers share the result as is: a T that holds a
// slice or a map must be treated as read-only.
func (g *Group[T]) Do(ctx context.Context, key string, spawn func(func()) bool, fn func() (T, error)) (T, error) {
	var zero T
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[string]*keyCalls[T])
	}
	k := g.calls[key]
	if k == nil {
		k = &keyCalls[T]{}
		g.calls[key] = k
	}
	var c *call[T]
	switch {
	case k.running == nil:
		c = &call[T]{fn: fn, done: make(chan struct{})}
		k.running = c
		run := func() { g.run(key, k) }
		started := spawn == nil
		if spawn == nil {
			go run()
		} else {
			started = spawn(run)
		}
		if !started {
			delete(g.calls, key)
			g.mu.Unlock()
			return zero, ErrRefused
		}
		if g.joined != nil {
			g.joined(key, false)
		}
	case k.next != nil:
		c = k.next
		if g.joined != nil {
			g.joined(key, true)
		}
	default:
		c = &call[T]{fn: fn, done: make(chan struct{})}
		k.next = c
		if g.joined != nil {
			g.joined(key, true)
		}
	}
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// run runs k's calls, the running one and each queued behind it, until none is
// queued; then it forgets key.
func (g *Group[T]) run(key string, k *keyCalls[T]) {
	g.mu.Lock()
	c := k.running
	g.mu.Unlock()
	for c != nil {
		c.val, c.err = c.fn()
		c.fn = nil
		close(c.done)
		g.mu.Lock()
		c, k.next = k.next, nil
		k.running = c
		if c == nil {
			delete(g.calls, key)
		}
		g.mu.Unlock()
	}
}
