package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestWSHotRoomDoesNotStarveQuiet: with a hot room's queue holding 200 events and a
// quiet room's one, the quiet event goes out in the connection's first batch, after
// at most one per-room budget of the hot room's, and every room's events keep their
// order (the order of arrival, not a time, is asserted).
func TestWSHotRoomDoesNotStarveQuiet(t *testing.T) {
	const hotEvents = 200
	p := newPod(t, podConfig{queue: 1024})
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	var once sync.Once
	gateway.SetWSBatchHook(p.srv, func(string) {
		once.Do(func() { held <- struct{}{}; <-hold })
	})
	c := dialWS(t, p)
	c.welcome("fair", boot1, map[string]string{"fair-hot": "", "fair-quiet": ""})
	select {
	case <-held: // the writer waits before its first batch
	case <-time.After(10 * time.Second):
		t.Fatal("the connection never reached its first batch")
	}
	ctx := context.Background()
	for range hotEvents {
		if _, err := p.log.Append(ctx, "fair-hot", replay.Message{Body: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	quiet, err := p.log.Append(ctx, "fair-quiet", replay.Message{Body: json.RawMessage(`"q"`)})
	if err != nil {
		t.Fatal(err)
	}
	replaytest.Eventually(t, 10*time.Second, "every event queued", func() bool {
		return p.rooms.Room("fair-hot").QueueDepth.Max == hotEvents && p.rooms.Room("fair-quiet").QueueDepth.Max == 1
	})
	release()
	hot := 0
	for {
		m := c.next()
		if m.Kind != "event" {
			t.Fatalf("got %+v, want an event", m)
		}
		if m.Room == "fair-quiet" {
			if m.Epoch != quiet.Epoch || m.Seq != quiet.Seq {
				t.Fatalf("quiet event %s:%d, want %v", m.Epoch, m.Seq, quiet.Position())
			}
			break
		}
		if hot++; m.Room != "fair-hot" || m.Seq != uint64(hot) {
			t.Fatalf("hot event %d: %+v", hot, m)
		}
	}
	// 128 items per batch over two rooms: a budget of 64 each.
	if hot > 64 {
		t.Fatalf("the quiet room's event came after %d of the hot room's, want at most one budget (64)", hot)
	}
	for hot < hotEvents {
		if m := c.next(); m.Kind != "event" || m.Room != "fair-hot" || m.Seq != uint64(hot+1) {
			t.Fatalf("hot event %d: %+v", hot+1, m)
		}
		hot++
	}
}
