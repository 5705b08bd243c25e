package replay

import (
	"context"
	"fmt"
	"sync"
)

// memNotices is a MemoryLog's pod notices (Notices): delivered in process, to the
// one listener of each pod. memNotices.mu and a listener's mu are never held
// together; a listener's fn runs under its own mu only.
type memNotices struct {
	l *MemoryLog

	mu        sync.Mutex
	listeners map[string]*memListener
}

type memListener struct {
	mu      sync.Mutex // held while fn runs: calls never overlap
	fn      func(string)
	stopped bool
}

var _ Notices = (*memNotices)(nil)

// NotifyPod implements Notices: fn of the pod's listener runs on the caller's
// goroutine, before NotifyPod returns. With no listener the notice is dropped.
func (n *memNotices) NotifyPod(ctx context.Context, pod, notice string) error {
	if n.l.closed.Load() {
		return ErrClosed
	}
	if !ValidPodID(pod) || !validNotice(notice) {
		return fmt.Errorf("replay: notify pod %q: %w", pod, ErrInvalid)
	}
	n.mu.Lock()
	w := n.listeners[pod]
	n.mu.Unlock()
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && !n.l.closed.Load() {
		w.fn(notice)
	}
	return nil
}

// PodNotices implements Notices.
func (n *memNotices) PodNotices(ctx context.Context, pod string, fn func(notice string)) error {
	if n.l.closed.Load() {
		return ErrClosed
	}
	if !ValidPodID(pod) {
		return fmt.Errorf("replay: pod notices %q: %w", pod, ErrInvalid)
	}
	w := &memListener{fn: fn}
	n.mu.Lock()
	if n.listeners == nil {
		n.listeners = make(map[string]*memListener)
	}
	if n.listeners[pod] != nil {
		n.mu.Unlock()
		return fmt.Errorf("replay: pod notices %q: already listening: %w", pod, ErrInvalid)
	}
	n.listeners[pod] = w
	n.mu.Unlock()
	var err error
	select {
	case <-ctx.Done():
	case <-n.l.stop:
		err = ErrClosed
	}
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	n.mu.Lock()
	delete(n.listeners, pod)
	n.mu.Unlock()
	return err
}
