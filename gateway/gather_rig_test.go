package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// gatherRig is a pod whose rooms' queues a test fills before it gathers batches from
// them by hand, as a connection's writer does.
type gatherRig struct {
	t    *testing.T
	p    *pod
	bell chan struct{} // rung by every member the rig joins
	ttl  time.Duration // of the events publish appends (0: none)
}

func newGatherRig(t *testing.T) *gatherRig {
	return &gatherRig{t: t, p: newPod(t, podConfig{queue: 1024}), bell: make(chan struct{}, 1)}
}

// join makes the rig a member of each room, in order.
func (g *gatherRig) join(names ...string) []*rooms.Member {
	g.t.Helper()
	var ms []*rooms.Member
	for _, name := range names {
		m, err := g.p.rooms.JoinBell(context.Background(), name, g.bell)
		if err != nil {
			g.t.Fatal(err)
		}
		g.t.Cleanup(func() { g.p.rooms.Leave(m) })
		ms = append(ms, m)
	}
	return ms
}

// publish appends n events of body to room and waits until the rig's member of the
// room has queued events in all.
func (g *gatherRig) publish(room string, n int, body string, queued int) {
	g.t.Helper()
	for range n {
		if _, err := g.p.log.Append(context.Background(), room, replay.Message{Body: json.RawMessage(body), TTL: g.ttl}); err != nil {
			g.t.Fatal(err)
		}
	}
	// A member rings the bell after each item it queued.
	for g.p.rooms.Room(room).QueueDepth.Max < queued {
		select {
		case <-g.bell:
		case <-time.After(10 * time.Second):
			g.t.Fatalf("room %s has %d events queued, want %d", room, g.p.rooms.Room(room).QueueDepth.Max, queued)
		}
	}
}
