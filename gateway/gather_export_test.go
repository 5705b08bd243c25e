package gateway

import (
	"context"
	"testing"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// Gatherer gathers live write batches from members' queues by hand, as a
// connection of a server does, with a transport's framing.
type Gatherer struct {
	s       *Server
	c       *conn
	started bool
}

// NewMuxGatherer gathers as a multiplexed stream of s over members does, each room
// from where its member joined. Its batches are SSE frames.
func NewMuxGatherer(s *Server, members []*rooms.Member) *Gatherer {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Room()
	}
	c := s.newConn(context.Background(), kindMux, &sseStream{}, len(members))
	c.token = replay.AppendTokenHead(nil, names)
	return newGatherer(s, c, members)
}

// NewWSGatherer gathers as a WebSocket connection of s over members does, each room
// from where its member joined. Its batches are messages.
func NewWSGatherer(s *Server, members []*rooms.Member) *Gatherer {
	wc := &wsConn{s: s}
	return newGatherer(s, s.newConn(context.Background(), kindWS, wc, len(members)), members)
}

func newGatherer(s *Server, c *conn, members []*rooms.Member) *Gatherer {
	for _, m := range members {
		c.rooms = append(c.rooms, connRoom{name: m.Room(), m: m, q: m.Queue()})
	}
	c.start(nil, nil)
	c.rr = newRoundRobin(len(members))
	return &Gatherer{s: s, c: c}
}

func (g *Gatherer) start() {
	if !g.started {
		g.c.batch = getBatch()
		g.started = true
	}
}

// SetSent moves room i's sent position to p.
func (g *Gatherer) SetSent(i int, p replay.Position) { g.c.setSent(i, p) }

// Add adds it to the batch as room i's next live item.
func (g *Gatherer) Add(i int, it *rooms.Item) {
	g.start()
	g.c.add(i, it)
}

// Gather completes a batch from the queues and returns it: its bytes, where each
// WebSocket message ends in them (nil for a stream), its count of events, and
// whether the queues may hold more.
func (g *Gatherer) Gather() (buf []byte, ends []int, events int, more bool) {
	g.start()
	more = g.c.rr.gather(g.c)
	buf, events = append([]byte(nil), g.c.batch.buf...), g.c.batch.n
	if g.c.kind == kindWS {
		ends = append([]int{}, g.c.batch.ends...)
	}
	g.s.settle(g.c, nil)
	g.started = false
	return buf, ends, events, more
}

// AllocsPerBatch is what gathering and settling one batch allocates, on average
// over runs batches (after one more to warm up), as the connection's writer does
// before and after its write.
func (g *Gatherer) AllocsPerBatch(runs int) float64 {
	return testing.AllocsPerRun(runs, func() {
		g.start()
		g.c.rr.gather(g.c)
		g.s.settle(g.c, nil)
		g.started = false
	})
}
