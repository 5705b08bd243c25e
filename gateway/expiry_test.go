package gateway_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// publishTTL publishes body to room with an Event-TTL and returns the event's id
// and when the answer came: the event's deadline is at most ttl after it.
func (p *pod) publishTTL(t testing.TB, room, body, ttl string) (string, time.Time) {
	t.Helper()
	res := do(t, http.MethodPost, p.public.URL+"/rooms/"+room+"/events", body,
		"Content-Type", "application/json", "Event-TTL", ttl, "Event-Type", "command")
	at := time.Now()
	if res.status != http.StatusCreated {
		t.Fatalf("publish to %s with Event-TTL %s: %d %s", room, ttl, res.status, res.body)
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(res.body), &out); err != nil {
		t.Fatal(err)
	}
	return out.ID, at
}

// waitPast returns once the clock is past at plus ttl: an event published before at
// with that TTL has expired by then. The deadline is a time, not another goroutine's
// doing, so the wait is for the clock.
func waitPast(at time.Time, ttl time.Duration) {
	time.Sleep(time.Until(at.Add(ttl + time.Millisecond)))
}

// expiredData is an expired marker's SSE data.
type expiredData struct {
	Room  string          `json:"room"`
	Epoch string          `json:"epoch"`
	Seq   uint64          `json:"seq"`
	Body  json.RawMessage `json:"body"`
}

// wantExpiredFrame checks an SSE frame: the expired marker of the event at id, in
// room; a multiplexed stream's id is a token, so only its data is checked there.
func wantExpiredFrame(t testing.TB, f frame, room, id string, mux bool) {
	t.Helper()
	var d expiredData
	if err := json.Unmarshal([]byte(f.data), &d); err != nil {
		t.Fatalf("expired frame %+v: %v", f, err)
	}
	pos, _ := replay.ParsePosition(id)
	if f.event != gateway.ExpiredType || d.Room != room || d.Epoch != pos.Epoch || d.Seq != pos.Seq || d.Body != nil {
		t.Fatalf("frame %+v, want the expired marker of %s in %s", f, id, room)
	}
	if mux != strings.HasPrefix(f.id, "m1.") || !mux && f.id != id {
		t.Fatalf("expired frame's id %q, want %s", f.id, id)
	}
}

// expiryPods are the backends a deadline must hold on: the embedded log and Redis,
// standalone and cluster.
var expiryPods = []struct {
	name string
	open func(t *testing.T, pc podConfig) *pod
}{
	{"Memory", func(t *testing.T, pc podConfig) *pod { return newPod(t, pc) }},
	{"RedisStandalone", func(t *testing.T, pc podConfig) *pod {
		return newFleetPod(t, redistest.SharedStandalone(t), replay.RedisConfig{}, pc)
	}},
	{"RedisCluster", func(t *testing.T, pc podConfig) *pod {
		return newFleetPod(t, redistest.SharedCluster(t), replay.RedisConfig{}, pc)
	}},
}

// TestExpiredReplayedAsMarker: a command published with a short TTL and replayed
// after its deadline comes as an expired marker (its id and position, no body) in
// its place, between the events around it, on a room's SSE stream, a multiplexed
// stream and a WebSocket connection, on every backend.
func TestExpiredReplayedAsMarker(t *testing.T) {
	for _, b := range expiryPods {
		t.Run(b.name, func(t *testing.T) {
			p := b.open(t, podConfig{})
			room, other := redistest.Prefix(t)+"-rig", redistest.Prefix(t)+"-other"
			// A multiplexed stream's token from before the events, to resume from.
			mux := p.subscribeMany(t, []string{room, other}, "")
			token := mux.anchor()
			mux.close()

			first := p.publish(t, room, `{"n":1}`)
			cmd, at := p.publishTTL(t, room, `"reboot rig 0414"`, "1ms")
			last := p.publish(t, room, `{"n":3}`)
			waitPast(at, time.Millisecond)

			t.Run("SSE", func(t *testing.T) {
				s := p.subscribe(t, room, "", "Last-Event-ID", first)
				wantExpiredFrame(t, s.next(), room, cmd, false)
				if f := s.next(); f.id != last || !strings.Contains(f.data, `"body":{"n":3}`) {
					t.Fatalf("after the marker: %+v, want %s", f, last)
				}
			})
			t.Run("Multiplexed", func(t *testing.T) {
				s := p.subscribeMany(t, []string{room, other}, "", "Last-Event-ID", token)
				s.muxAnchor()
				var got []string
				for len(got) < 3 {
					f := s.next()
					if f.event == gateway.ExpiredType {
						wantExpiredFrame(t, f, room, cmd, true)
						got = append(got, "expired@"+cmd)
						continue
					}
					var d expiredData
					if err := json.Unmarshal([]byte(f.data), &d); err != nil || d.Body == nil {
						t.Fatalf("frame %+v", f)
					}
					got = append(got, string(d.Body))
				}
				if want := `{"n":1} expired@` + cmd + ` {"n":3}`; strings.Join(got, " ") != want {
					t.Fatalf("replayed %v, want %s", got, want)
				}
			})
			t.Run("WebSocket", func(t *testing.T) {
				ws := dialWS(t, p)
				ws.welcome("expiry-"+b.name, boot1, map[string]string{room: first})
				if m := ws.next(); m.Kind != wsclient.KindExpired || m.ID != cmd || m.Room != room || m.Body != nil ||
					m.Epoch+":"+strconv.FormatUint(m.Seq, 10) != cmd {
					t.Fatalf("frame %+v, want the expired marker of %s", m, cmd)
				}
				if m := ws.next(); m.Kind != wsclient.KindEvent || m.ID != last {
					t.Fatalf("after the marker: %+v, want event %s", m, last)
				}
				// The marker's id is the client's to acknowledge: no error before the pong.
				ws.ack(room, cmd)
				ws.send(map[string]any{"v": 1, "kind": "ping"})
				if m := ws.next(); m.Kind != wsclient.KindPong {
					t.Fatalf("after acknowledging the marker: %+v, want the pong", m)
				}
			})
		})
	}
}

// TestExpiredInASlowQueue: a live event that waits in a member's queue past its
// deadline (the connection is held before it gathers its batch, as a slow one would
// be) goes out as its expired marker; the event after it, without a deadline, and
// an event whose deadline is far ahead go out as themselves.
func TestExpiredInASlowQueue(t *testing.T) {
	p := newPod(t, podConfig{})
	room := "slow-ttl"
	gate := make(chan struct{})
	held := make(chan struct{}, 16)
	var released atomic.Bool
	gateway.SetMuxBatchHook(p.srv, func() {
		if released.Load() {
			return
		}
		select {
		case held <- struct{}{}:
		default:
		}
		<-gate
		released.Store(true)
	})
	s := p.subscribe(t, room, "")
	ws := dialWS(t, p)
	ws.welcome("slow-ttl", boot1, map[string]string{room: ""})
	for i := 0; i < 2; i++ {
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatal("the connections never reached their first batch")
		}
	}
	cmd, at := p.publishTTL(t, room, `"reboot rig 0414"`, "1ms")
	later, _ := p.publishTTL(t, room, `"later"`, "1h")
	plain := p.publish(t, room, `{"n":3}`)
	waitPast(at, time.Millisecond)
	close(gate)

	wantExpiredFrame(t, s.next(), room, cmd, false)
	for _, id := range []string{later, plain} {
		if f := s.next(); f.id != id || f.event == gateway.ExpiredType {
			t.Fatalf("SSE after the marker: %+v, want event %s", f, id)
		}
	}
	if m := ws.next(); m.Kind != wsclient.KindExpired || m.ID != cmd || m.Room != room {
		t.Fatalf("WebSocket: %+v, want the expired marker of %s", m, cmd)
	}
	for _, id := range []string{later, plain} {
		if m := ws.next(); m.Kind != wsclient.KindEvent || m.ID != id {
			t.Fatalf("WebSocket after the marker: %+v, want event %s", m, id)
		}
	}
}

// TestEventTTLRefused: a TTL that is not a positive duration or whole seconds, or
// is longer than the history is kept, is answered 400 invalid_ttl on every publish
// path, and nothing is published.
func TestEventTTLRefused(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxTTL: time.Hour}})
	url := p.public.URL + "/rooms/ttl/events"
	ws := dialWS(t, p)
	ws.welcome("ttl-refused", boot1, map[string]string{"other": ""})
	for _, ttl := range []string{"", "0", "0s", "-5s", "soon", "1d", "5 m", "999us", "2h", "3601", "1e3"} {
		t.Run(ttl, func(t *testing.T) {
			res := do(t, http.MethodPost, url, `1`, "Content-Type", "application/json", "Event-TTL", ttl)
			assertError(t, res, 400, "invalid_ttl")
			ws.publish(wsclient.Publish{Room: "ttl", Body: 1, TTL: ttl, Ref: "r"})
			if ttl == "" {
				// An empty ttl field is no ttl: it publishes.
				if m := ws.next(); m.Kind != wsclient.KindPublished || m.Seq != 1 {
					t.Fatalf("WebSocket publish without a ttl: %+v", m)
				}
				return
			}
			if m := ws.next(); m.Kind != wsclient.KindError || m.Error != "invalid_ttl" || m.Ref != "r" {
				t.Fatalf("WebSocket publish: %+v, want error invalid_ttl", m)
			}
			item, _ := json.Marshal(map[string]any{"room": "ttl", "body": 1, "ttl": ttl})
			res = do(t, http.MethodPost, p.public.URL+"/events", "["+string(item)+"]", "Content-Type", "application/json")
			if res.status != 200 || !strings.Contains(res.body, `"status":400`) || !strings.Contains(res.body, `"error":"invalid_ttl"`) {
				t.Fatalf("batch: %d %s", res.status, res.body)
			}
		})
	}
	// A good TTL publishes on every path.
	if res := do(t, http.MethodPost, url, `1`, "Content-Type", "application/json", "Event-TTL", "90"); res.status != 201 || !strings.Contains(res.body, `"seq":2,`) {
		t.Fatalf("Event-TTL 90: %d %s", res.status, res.body)
	}
	res := do(t, http.MethodPost, p.public.URL+"/events", `[{"room":"ttl","body":1,"ttl":"30m"},{"room":"ttl","body":2,"ttl":60}]`, "Content-Type", "application/json")
	if res.status != 200 || strings.Count(res.body, `"status":201`) != 2 {
		t.Fatalf("batch with good TTLs: %d %s", res.status, res.body)
	}
	ws.publish(wsclient.Publish{Room: "ttl", Body: 1, TTL: "1h"})
	if m := ws.next(); m.Kind != wsclient.KindPublished || m.Seq != 5 {
		t.Fatalf("WebSocket publish with ttl 1h: %+v", m)
	}
}
