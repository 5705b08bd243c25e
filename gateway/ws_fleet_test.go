package gateway_test

import (
	"strconv"
	"testing"

	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestWSFleetEventsCrossPodsAndResumeElsewhere: on a real Redis Cluster, a
// WebSocket client on pod B gets what pod A publishes (upstream, over its own
// WebSocket) in order; it drops after 40 events and resumes on pod A from its last
// id, with nothing lost or repeated, together with an SSE member there.
func TestWSFleetEventsCrossPodsAndResumeElsewhere(t *testing.T) {
	c := redistest.SharedCluster(t)
	a := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	b := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	room := redistest.Prefix(t)

	onB := dialWS(t, b)
	onB.welcome("fleet-reader", boot1, map[string]string{room: ""})
	pub := dialWS(t, a)
	pub.welcome("fleet-publisher", boot1, map[string]string{room + "-other": ""})
	var ids []string
	for i := 1; i <= 100; i++ {
		pub.publish(wsclient.Publish{Room: room, Body: map[string]int{"i": i}, Ref: strconv.Itoa(i)})
		m := pub.next()
		if m.Kind != "published" || m.Ref != strconv.Itoa(i) {
			t.Fatalf("publish %d: %+v", i, m)
		}
		ids = append(ids, m.ID)
	}
	for i := 0; i < 40; i++ {
		if m := onB.next(); m.Kind != "event" || m.ID != ids[i] {
			t.Fatalf("pod B event %d: %+v, want %s", i, m, ids[i])
		}
	}
	_ = onB.c.CloseNow()
	sse := a.subscribe(t, room, "", "Last-Event-ID", ids[39])
	resumed := dialWS(t, a)
	resumed.welcome("fleet-reader", boot1, map[string]string{room: ids[39]})
	live := a.publish(t, room, `{"i":101}`)
	for _, id := range append(ids[40:], live) {
		if m := resumed.next(); m.Kind != "event" || m.ID != id {
			t.Fatalf("resumed on A: %+v, want %s", m, id)
		}
		if f := sse.next(); f.id != id {
			t.Fatalf("SSE on A: %q, want %s", f.id, id)
		}
	}
}
