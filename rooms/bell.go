package rooms

import "context"

// JoinBell is Join for a reader that serves several members from one goroutine: the
// member rings bell (a non-blocking send; give it a buffer of one) whenever an item
// reaches its queue and when it is closed, so the reader waits on one channel
// instead of every member's queue and Done. Items queued while JoinBell returns may
// come without a ring: the reader looks at every queue once after joining.
func (g *Registry) JoinBell(ctx context.Context, name string, bell chan struct{}) (*Member, error) {
	m, err := g.Join(ctx, name)
	if err != nil {
		return nil, err
	}
	m.bell.Store(&bell)
	return m, nil
}

// Waker is a reader that no goroutine waits for: an event loop's connection, which
// Wake schedules on its worker. Wake must not block: it runs under the room's lock,
// on the fan-out's path.
type Waker interface{ Wake() }

// SetWaker has the member wake w whenever an item reaches its queue and when it is
// closed, in place of its bell, which it lets go of. Items queued before SetWaker
// returns may come without a wake: the reader looks at the queue once after setting
// it.
func (m *Member) SetWaker(w Waker) {
	m.waker.Store(w)
	m.bell.Store(nil)
}

// ring wakes the member's reader: its waker, else its bell, if it has one.
func (m *Member) ring() {
	if w, _ := m.waker.Load().(Waker); w != nil {
		w.Wake()
		return
	}
	if b := m.bell.Load(); b != nil {
		select {
		case *b <- struct{}{}:
		default:
		}
	}
}
