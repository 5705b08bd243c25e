package gateway

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/rooms"
)

// Connections is the pod's registry of open connections, of every transport: a
// single-room stream, a multiplexed stream or a WebSocket connection is one entry,
// however many rooms it follows. It is what a drain paces and sheds
// (drain.Target): a shed closes a connection's room memberships together, so a
// connection of 32 rooms counts once, as a stream of one room does.
//
// Make one with NewConnections, hand it to drain.New and to New (Config.Connections).
type Connections struct {
	reg *rooms.Registry

	live  atomic.Int64           // registered and not shed
	kinds [numKinds]atomic.Int64 // registered, by transport

	mu      sync.Mutex
	open    map[*openConn]struct{}
	changed chan struct{} // closed and replaced whenever a connection leaves
}

// openConn is one registered connection: the room members it holds.
type openConn struct {
	members []*rooms.Member
	shed    atomic.Bool // a shed closed it; it leaves once its handler returns
}

// NewConnections returns an empty registry for the connections over reg.
func NewConnections(reg *rooms.Registry) *Connections {
	return &Connections{reg: reg, open: map[*openConn]struct{}{}, changed: make(chan struct{})}
}

// add registers a connection of kind holding members (joined already) and returns
// the func that removes it, which the connection calls once it has ended.
func (c *Connections) add(kind connKind, members []*rooms.Member) (remove func()) {
	oc := &openConn{members: members}
	c.mu.Lock()
	c.open[oc] = struct{}{}
	c.mu.Unlock()
	c.live.Add(1)
	c.kinds[kind].Add(1)
	return func() {
		if !oc.shed.Swap(true) {
			c.live.Add(-1)
		}
		c.kinds[kind].Add(-1)
		c.mu.Lock()
		delete(c.open, oc)
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
}

// Len reports the open connections: registered, and not yet closed by a shed.
func (c *Connections) Len() int { return int(c.live.Load()) }

// count reports the registered connections of kind, shed or not, until they leave.
func (c *Connections) count(kind connKind) int64 { return c.kinds[kind].Load() }

// Shed closes up to n open connections with rooms.ReasonShed, each with a
// reconnect hint, and reports how many it closed. A connection closed before (by
// an earlier shed, or on its own) does not count.
func (c *Connections) Shed(n int) int {
	if n <= 0 {
		return 0
	}
	c.mu.Lock()
	batch := make([]*openConn, 0, min(n, len(c.open)))
	for oc := range c.open {
		if oc.shed.Load() {
			continue // closed, and on its way out
		}
		batch = append(batch, oc)
		if len(batch) == cap(batch) {
			break
		}
	}
	c.mu.Unlock()
	closed := 0
	for _, oc := range batch {
		if c.shed(oc) {
			closed++
		}
	}
	return closed
}

// shed closes every membership of oc, once; it reports whether this call did.
func (c *Connections) shed(oc *openConn) bool {
	if oc.shed.Swap(true) {
		return false
	}
	c.live.Add(-1)
	for _, m := range oc.members {
		m.Close(rooms.ReasonShed)
	}
	return true
}

// CloseAll closes every connection and waits until each has left, or ctx ends;
// then it closes whatever room member no connection held yet (one still joining
// sees the drain and ends on its own).
func (c *Connections) CloseAll(ctx context.Context) error {
	c.Shed(c.Len())
	for {
		c.mu.Lock()
		left, changed := len(c.open), c.changed
		c.mu.Unlock()
		if left == 0 {
			return c.reg.CloseAll(ctx)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("gateway: %d connections still open: %w", left, ctx.Err())
		}
	}
}

// connected makes a connection that has joined its rooms (members; the first
// stands for it) one of the pod's connections, the same for every transport: the
// drain and sheds see it, a revocation reaching the pod or its credential's expiry
// ends it with a reauth, and the credential is checked once more, since a
// revocation that landed while it was joining (a room's first join can take seconds
// on Redis) found nothing to end then. It returns the func that undoes all of it,
// for when the connection has ended. With timer unset, the expiry is the caller's
// to watch.
func (s *Server) connected(p auth.Principal, kind connKind, members []*rooms.Member, timer bool) (done func()) {
	first := members[0]
	remove := s.conns.add(kind, members)
	unwatch := s.sessions.add(p, first)
	stop := func() {}
	if timer {
		stop = expireAt(first, p.Expires)
	}
	if s.auth.Revoked(p) {
		first.Close(rooms.ReasonReauth)
	}
	return func() {
		stop()
		unwatch()
		remove()
	}
}

// shedAway closes up to n open connections, like Shed, preferring those away from
// home: it looks at a sample of the open connections, asks away which of their rooms
// (at most maxHomeRooms) are held more on another pod, and sheds first the
// connections every room of which is, then any of the sample. It reports how many
// it closed, and how many of those were away.
func (c *Connections) shedAway(n int, away func(rooms []string) map[string]bool) (closed, awayClosed int) {
	if n <= 0 {
		return 0, 0
	}
	c.mu.Lock()
	sample := make([]*openConn, 0, min(len(c.open), max(64, 16*n), 4096))
	for oc := range c.open { // map order: a different sample each round
		if !oc.shed.Load() {
			sample = append(sample, oc)
		}
		if len(sample) == cap(sample) {
			break
		}
	}
	c.mu.Unlock()
	var rooms []string
	seen := map[string]bool{}
	for _, oc := range sample {
		for _, m := range oc.members {
			if r := m.Room(); !seen[r] && len(rooms) < maxHomeRooms {
				seen[r] = true
				rooms = append(rooms, r)
			}
		}
	}
	isAway := away(rooms)
	allAway := func(oc *openConn) bool {
		for _, m := range oc.members {
			if !isAway[m.Room()] {
				return false
			}
		}
		return len(oc.members) > 0
	}
	for pass := range 2 {
		for _, oc := range sample {
			if closed == n {
				return closed, awayClosed
			}
			if a := allAway(oc); (pass == 0) == a && c.shed(oc) {
				closed++
				if a {
					awayClosed++
				}
			}
		}
	}
	return closed, awayClosed
}
