package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// A drain paces connections, not room members: 20 multiplexed streams of 10 rooms
// each are 20 connections, so a window of 10 ticks closes two or three of them a
// tick (what is left of the window, rounded down, over the tick). Paced by members
// (200), the first batch closed all 20 at once.
func TestDrainPacesConnectionsNotMembers(t *testing.T) {
	const streams, perStream = 20, 10
	// Ticks long enough that the first batch is over well before the second.
	p := newPod(t, podConfig{drain: drain.Config{Window: 20 * time.Second, Tick: 2 * time.Second, Timeout: 60 * time.Second}})
	names := make([]string, perStream)
	for i := range names {
		names[i] = fmt.Sprintf("r%d", i)
	}
	open := make([]*stream, streams)
	for i := range open {
		open[i] = p.subscribeMany(t, names, "")
	}
	replaytest.Eventually(t, 10*time.Second, "every stream joined", func() bool { return p.rooms.Len() == streams*perStream })
	if got := p.drain.Progress().Open; got != streams {
		t.Fatalf("the drain sees %d open, want %d connections", got, streams)
	}
	p.drain.Start()
	// The first batch: ceil(20 / 9 or 10 ticks) connections.
	replaytest.Eventually(t, 10*time.Second, "the first batch", func() bool { return p.drain.Closed() > 0 })
	if got := p.drain.Closed(); got > 3 {
		t.Fatalf("the first batch closed %d, want at most 3 of %d connections", got, streams)
	}
	if ended := endedOf(open); ended > 3 {
		t.Fatalf("%d streams ended after the first batch, want at most 3", ended)
	}
	p.drain.Force()
	<-p.drain.Done()
	for _, s := range open {
		s.waitEnd()
	}
	if got := p.drain.Closed(); got != streams {
		t.Fatalf("the drain counted %d closes, want %d", got, streams)
	}
}

// POST /admin/shed?count=N closes N connections, whatever rooms each follows.
func TestShedClosesConnections(t *testing.T) {
	p := newPod(t, podConfig{})
	names := []string{"a", "b", "c"}
	open := []*stream{p.subscribeMany(t, names, ""), p.subscribeMany(t, names, ""), p.subscribe(t, "a", "")}
	replaytest.Eventually(t, 10*time.Second, "every stream joined", func() bool { return p.rooms.Len() == 7 })
	res := do(t, "POST", p.admin.URL+"/admin/shed?count=2", "")
	if res.status != 200 || res.body != `{"closed":2}`+"\n" {
		t.Fatalf("shed: %d %q", res.status, res.body)
	}
	replaytest.Eventually(t, 10*time.Second, "two streams ended", func() bool { return endedOf(open) == 2 })
	if got := p.drain.Progress().Open; got != 1 {
		t.Fatalf("%d connections open after the shed, want 1", got)
	}
}

// endedOf counts the streams that have ended.
func endedOf(streams []*stream) int {
	n := 0
	for _, s := range streams {
		select {
		case <-s.ended:
			n++
		default:
		}
	}
	return n
}
