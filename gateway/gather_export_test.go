package gateway

import (
	"testing"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// Gatherer gathers live write batches from members' queues by hand, as a
// multiplexed stream or a WebSocket connection of a server does.
type Gatherer struct {
	s       *Server
	rr      roundRobin
	sink    batchSink
	batch   *liveBatch
	ends    *[]int // the WebSocket messages' ends; nil for a stream
	setSent func(i int, p replay.Position)
	started bool
}

// NewMuxGatherer gathers as a multiplexed stream of s over members does, each room
// from where its member joined. Its batches are SSE frames.
func NewMuxGatherer(s *Server, members []*rooms.Member) *Gatherer {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.Room()
	}
	ms := &muxStream{s: s, head: replay.AppendTokenHead(nil, names)}
	for _, m := range members {
		ms.rooms = append(ms.rooms, muxRoom{liveRoom: liveRoom{name: m.Room(), m: m, q: m.Queue()}})
		ms.rooms[len(ms.rooms)-1].set(m.Start())
	}
	return &Gatherer{s: s, rr: newRoundRobin(len(members)), sink: ms, batch: &ms.batch,
		setSent: func(i int, p replay.Position) { ms.rooms[i].set(p) }}
}

// NewWSGatherer gathers as a WebSocket connection of s over members does, each room
// from where its member joined. Its batches are messages.
func NewWSGatherer(s *Server, members []*rooms.Member) *Gatherer {
	wc := &wsConn{s: s}
	for _, m := range members {
		wc.rooms = append(wc.rooms, wsRoom{liveRoom: liveRoom{name: m.Room(), m: m, q: m.Queue(), sent: m.Start()}})
	}
	return &Gatherer{s: s, rr: newRoundRobin(len(members)), sink: wc, batch: &wc.batch, ends: &wc.ends,
		setSent: func(i int, p replay.Position) { wc.rooms[i].sent = p }}
}

func (g *Gatherer) start() {
	if !g.started {
		g.batch.borrow()
		if g.ends != nil {
			*g.ends = (*g.ends)[:0]
		}
		g.started = true
	}
}

// SetSent moves room i's sent position to p.
func (g *Gatherer) SetSent(i int, p replay.Position) { g.setSent(i, p) }

// Add adds it to the batch as room i's next live item.
func (g *Gatherer) Add(i int, it *rooms.Item) {
	g.start()
	g.sink.add(i, it)
}

// Gather completes a batch from the queues and returns it: its bytes, where each
// WebSocket message ends in them (nil for a stream), its count of events, and
// whether the queues may hold more.
func (g *Gatherer) Gather() (buf []byte, ends []int, events int, more bool) {
	g.start()
	more = g.rr.gather(g.sink)
	buf, events = append([]byte(nil), g.batch.buf...), g.batch.n
	if g.ends != nil {
		ends = append([]int{}, *g.ends...)
	}
	g.s.settle(g.batch, nil)
	g.started = false
	return buf, ends, events, more
}

// AllocsPerBatch is what gathering and settling one batch allocates, on average
// over runs batches (after one more to warm up), as the connection's writer does
// before and after its write.
func (g *Gatherer) AllocsPerBatch(runs int) float64 {
	return testing.AllocsPerRun(runs, func() {
		g.start()
		g.rr.gather(g.sink)
		g.s.settle(g.batch, nil)
		g.started = false
	})
}
