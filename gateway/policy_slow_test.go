package gateway_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
	"github.com/roomcast/roomcast/rooms"
)

// policyFrame is an event or a resync of one room, as any transport delivers it.
type policyFrame struct {
	room   string
	resync bool
	epoch  string
	seq    uint64
}

// sseFrame reads an SSE stream's next event or resync.
func sseFrame(s *stream) policyFrame {
	s.t.Helper()
	ev := s.envelope(s.next())
	return policyFrame{room: ev.room, resync: ev.event == "resync", epoch: ev.pos.Epoch, seq: ev.pos.Seq}
}

// testPolicies keep only the latest event of rooms ticker.* and drop the oldest of
// rooms feed.*; other rooms close slow clients.
var testPolicies = func() gateway.RoomPolicies {
	ps, err := gateway.ParseRoomPolicies([]string{"ticker.*=latest", "feed.*=drop-oldest"})
	if err != nil {
		panic(err)
	}
	return ps
}()

// policyPod is a pod under testPolicies with queues of 8 events.
func policyPod(t *testing.T) *pod {
	t.Helper()
	return newPod(t, podConfig{queue: 8, policy: testPolicies.For})
}

// holdFirstBatch makes the pod's connections wait before their first live batch
// until the returned release is called: a reader that stops reading. held fires once
// a connection waits there.
func holdFirstBatch(t *testing.T, p *pod) (held <-chan struct{}, release func()) {
	hold, h := make(chan struct{}), make(chan struct{}, 1)
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	var once sync.Once
	gateway.SetMuxBatchHook(p.srv, func() {
		once.Do(func() { h <- struct{}{}; <-hold })
	})
	return h, release
}

// checkSlowPolicies publishes events[room] events to each room while the
// connection holds before its first batch, lets it go, and reads with one loss
// tracker per room until every room's last event: each room's seqs are all either
// delivered in order or skipped by a resync announcing them (never a silent hole),
// rooms under a policy resynced and stayed open, and the metrics count the drops
// and resyncs by policy. Then the reader keeps up: new events come in order, with
// no resync.
func checkSlowPolicies(t *testing.T, p *pod, held <-chan struct{}, release func(), events map[string]int, next func() policyFrame) {
	t.Helper()
	ctx := context.Background()
	publish := func(room string, n int) {
		for range n {
			if _, err := p.log.Append(ctx, room, replay.Message{Body: json.RawMessage(`1`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := slices.Sorted(maps.Keys(events))
	policyOf := testPolicies.For
	for _, room := range names {
		publish(room, events[room])
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection never reached its first batch")
	}
	replaytest.Eventually(t, 10*time.Second, "the full queues shed", func() bool {
		st := p.rooms.Stats()
		for _, room := range names {
			if pol := policyOf(room); pol != rooms.PolicyClose && st.PolicyDrops[pol] == 0 {
				return false
			}
		}
		return true
	})
	release()

	trackers := map[string]*gatewaytest.Tracker{}
	delivered := map[string]uint64{}
	last := map[string]uint64{}
	for _, room := range names {
		tr := &gatewaytest.Tracker{}
		tr.ExpectFirst(1)
		tr.ResyncIsHead()
		trackers[room] = tr
	}
	read := func(want map[string]uint64) {
		t.Helper()
		for !maps.Equal(last, want) {
			f := next()
			tr := trackers[f.room]
			if tr == nil {
				t.Fatalf("a frame of room %q, which the connection does not follow", f.room)
			}
			if f.resync {
				tr.Resync([]byte(f.epoch), f.seq)
				continue
			}
			if v := tr.Observe([]byte(f.epoch), f.seq); v != gatewaytest.InOrder {
				t.Fatalf("room %s: seq %d %s (tracker at %d)", f.room, f.seq, v, tr.Last())
			}
			delivered[f.room]++
			last[f.room] = f.seq
		}
	}
	want := map[string]uint64{}
	for _, room := range names {
		want[room] = uint64(events[room])
	}
	read(want)

	m := p.metrics(t)
	var resyncs [rooms.NumPolicies]uint64
	for _, room := range names {
		tr, pol := trackers[room], policyOf(room)
		resyncs[pol] += tr.Resyncs
		if tr.Lossy() || delivered[room]+tr.Skipped != want[room] {
			t.Errorf("room %s (%s): %d delivered, %d skipped by %d resyncs, of %d; gaps %d, duplicates %d",
				room, pol, delivered[room], tr.Skipped, tr.Resyncs, want[room], tr.Gaps(), tr.Duplicates)
		}
		if pol != rooms.PolicyClose && (tr.Resyncs == 0 || tr.Skipped == 0) {
			t.Errorf("room %s (%s): no resync announced the events its full queue dropped", room, pol)
		}
		if pol == rooms.PolicyClose && tr.Resyncs != 0 {
			t.Errorf("room %s (close): %d resyncs, want none", room, tr.Resyncs)
		}
	}
	st := p.rooms.Stats()
	for _, pol := range rooms.Policies {
		if got := m.Value("roomcast_queue_policy_drops_total", "policy", pol.String()); got != float64(st.PolicyDrops[pol]) {
			t.Errorf("roomcast_queue_policy_drops_total{policy=%q} = %v, want %d", pol, got, st.PolicyDrops[pol])
		}
		if got := m.Value("roomcast_queue_policy_resyncs_total", "policy", pol.String()); got != float64(resyncs[pol]) {
			t.Errorf("roomcast_queue_policy_resyncs_total{policy=%q} = %v, want %d", pol, got, resyncs[pol])
		}
	}
	if st.SlowDrops != 0 || p.rooms.Len() != len(names) {
		t.Fatalf("slow drops %d, open members %d: want no client closed", st.SlowDrops, p.rooms.Len())
	}

	// Reading again, the client gets every new event in order.
	before := map[string]uint64{}
	for _, room := range names {
		before[room] = trackers[room].Resyncs
		publish(room, 3)
		want[room] += 3
	}
	read(want)
	for _, room := range names {
		if trackers[room].Resyncs != before[room] || trackers[room].Lossy() {
			t.Errorf("room %s: a resync or a loss after the client caught up", room)
		}
	}
}

// TestPolicySSE: a single-room stream whose reader stops reading keeps only the
// latest event (ticker.*) or loses its oldest (feed.*), with a resync to where it
// jumps, and stays open.
func TestPolicySSE(t *testing.T) {
	for _, room := range []string{"ticker.sse", "feed.sse"} {
		t.Run(room, func(t *testing.T) {
			p := policyPod(t)
			held, release := holdFirstBatch(t, p)
			s := p.subscribe(t, room, "")
			checkSlowPolicies(t, p, held, release, map[string]int{room: 40}, func() policyFrame { return sseFrame(s) })
		})
	}
}

// TestPolicyMultiplexed: on a multiplexed stream each room follows its own policy:
// the ticker and the feed resync past what they dropped, the plain room loses
// nothing, and the stream stays open.
func TestPolicyMultiplexed(t *testing.T) {
	p := policyPod(t)
	held, release := holdFirstBatch(t, p)
	s := p.subscribeMany(t, []string{"ticker.mux", "feed.mux", "plain.mux"}, "")
	s.anchor()
	checkSlowPolicies(t, p, held, release, map[string]int{"ticker.mux": 40, "feed.mux": 40, "plain.mux": 5},
		func() policyFrame { return sseFrame(s) })
}

// TestPolicyWebSocket: the same on a WebSocket connection.
func TestPolicyWebSocket(t *testing.T) {
	p := policyPod(t)
	held, release := holdFirstBatch(t, p)
	c := dialWS(t, p)
	c.welcome("policy", boot1, map[string]string{"ticker.ws": "", "feed.ws": "", "plain.ws": ""})
	checkSlowPolicies(t, p, held, release, map[string]int{"ticker.ws": 40, "feed.ws": 40, "plain.ws": 5}, func() policyFrame {
		for {
			m := c.next()
			switch m.Kind {
			case "event", "resync":
				return policyFrame{room: m.Room, resync: m.Kind == "resync", epoch: m.Epoch, seq: m.Seq}
			}
		}
	})
}
