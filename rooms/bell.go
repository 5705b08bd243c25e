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

// ring wakes the member's reader, if it has a bell.
func (m *Member) ring() {
	if b := m.bell.Load(); b != nil {
		select {
		case *b <- struct{}{}:
		default:
		}
	}
}
