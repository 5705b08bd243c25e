package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
)

var boot1 = testBoot(1_700_000_000_000, 1)

func TestWSHelloWelcome(t *testing.T) {
	p := newPod(t, podConfig{})
	p.publish(t, "orders", `{"n":1}`)
	c := dialWS(t, p)
	w := c.welcome("rig-0414", boot1, map[string]string{"orders": "", "alerts": ""})
	if len(w.Session) < 16 {
		t.Fatalf("session %q", w.Session)
	}
	// Each room resumes from where the connection joined it.
	if got := w.Rooms["orders"]; !strings.HasSuffix(got, ":1") {
		t.Fatalf("orders resumes from %q, want <epoch>:1", got)
	}
	if got := w.Rooms["alerts"]; got != "0" {
		t.Fatalf("alerts resumes from %q, want 0 (no history)", got)
	}
	id := p.publish(t, "orders", `{"n":2}`)
	m := c.next()
	if m.Kind != "event" || m.Room != "orders" || m.ID != id || m.Seq != 2 || m.Type != "message" || string(m.Body) != `{"n":2}` || m.TS == 0 || m.Epoch == "" {
		t.Fatalf("event frame %+v, want orders %s", m, id)
	}
}

func TestWSHelloTimeout(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{WSHelloTimeout: 100 * time.Millisecond}})
	c := dialWS(t, p)
	c.wantClose(4408)
	if v := p.metrics(t).Value("roomcast_ws_closed_total", "code", "4408"); v != 1 {
		t.Fatalf("4408 closes counted: %v", v)
	}
}

func TestWSMalformedHello(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxRoomsPerStream: 2}})
	for _, tc := range []struct {
		name  string
		frame string
	}{
		{"not json", `hello`},
		{"no version", `{"kind":"hello","client":"c","boot":"` + boot1 + `","rooms":{"a":""}}`},
		{"not a hello", `{"v":1,"kind":"ping"}`},
		{"bad client", `{"v":1,"kind":"hello","client":"a b","boot":"` + boot1 + `","rooms":{"a":""}}`},
		{"no client", `{"v":1,"kind":"hello","boot":"` + boot1 + `","rooms":{"a":""}}`},
		{"bad boot", `{"v":1,"kind":"hello","client":"c","boot":"not-a-uuid","rooms":{"a":""}}`},
		{"uuid v4 boot", `{"v":1,"kind":"hello","client":"c","boot":"0190b2a8-1234-4abc-8def-0123456789ab","rooms":{"a":""}}`},
		{"bad room", `{"v":1,"kind":"hello","client":"c","boot":"` + boot1 + `","rooms":{"a{b}":""}}`},
		{"no rooms", `{"v":1,"kind":"hello","client":"c","boot":"` + boot1 + `","rooms":{}}`},
		{"too many rooms", `{"v":1,"kind":"hello","client":"c","boot":"` + boot1 + `","rooms":{"a":"","b":"","c":""}}`},
		{"bad resume id", `{"v":1,"kind":"hello","client":"c","boot":"` + boot1 + `","rooms":{"a":"x:y"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialWS(t, p)
			c.send(tc.frame)
			c.wantClose(4400)
		})
	}
	if p.rooms.Len() != 0 {
		t.Fatalf("%d members left", p.rooms.Len())
	}
}

func TestWSCredentials(t *testing.T) {
	keys := gatewaytest.NewKeys(t)
	p := newMemSecurePod(t, keys, gateway.Config{AllowOrigins: []string{"https://app.example.com"}})

	t.Run("bad bearer is a plain 401", func(t *testing.T) {
		_, res, err := dialWSRaw(t, p.public.URL, new(atomic.Int64), "Authorization", "Bearer nonsense")
		if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("dial: %v, %v", err, res)
		}
		var body struct{ Error, Message string }
		if json.NewDecoder(res.Body).Decode(&body) != nil || body.Error != "unauthorized" {
			t.Fatalf("401 body %+v", body)
		}
	})
	t.Run("foreign origin is a plain 403", func(t *testing.T) {
		_, res, err := dialWSRaw(t, p.public.URL, new(atomic.Int64), "Origin", "https://evil.example.com")
		if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("dial: %v, %v", err, res)
		}
		var body struct{ Error, Message string }
		if json.NewDecoder(res.Body).Decode(&body) != nil || body.Error != "forbidden_origin" {
			t.Fatalf("403 body %+v", body)
		}
	})
	t.Run("allowed origin upgrades", func(t *testing.T) {
		c := dialWS(t, p.pod, "Origin", "https://app.example.com")
		c.welcome("anon:c1", boot1, map[string]string{"public.news": ""})
	})
	t.Run("anonymous on a private room is 4401", func(t *testing.T) {
		c := dialWS(t, p.pod)
		c.hello("anon:c2", boot1, map[string]string{"public.news": "", "private": ""})
		frames := c.wantClose(4401)
		if len(frames) != 1 || frames[0].Error != "unauthorized" || frames[0].Room != "private" {
			t.Fatalf("frames before the close: %+v", frames)
		}
	})
	t.Run("room not granted is 4403 naming it", func(t *testing.T) {
		tok := p.token(t, "RS256", "alice", time.Hour, []string{"orders"}, nil)
		c := dialWS(t, p.pod, "Authorization", "Bearer "+tok)
		c.hello("c3", boot1, map[string]string{"orders": "", "payroll": ""})
		frames := c.wantClose(4403)
		if len(frames) != 1 || frames[0].Error != "forbidden" || !strings.Contains(frames[0].Message, "payroll") {
			t.Fatalf("frames before the close: %+v", frames)
		}
	})
	t.Run("revoked while connected is 4401", func(t *testing.T) {
		tok := p.token(t, "RS256", "carol", time.Hour, []string{"orders"}, nil)
		c := dialWS(t, p.pod, "Authorization", "Bearer "+tok)
		c.welcome("c5", boot1, map[string]string{"orders": ""})
		res := do(t, http.MethodPost, p.admin.URL+"/admin/revoke", `{"sub":"carol"}`, "Content-Type", "application/json")
		if res.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", res.status, res.body)
		}
		c.wantClose(4401)
	})
	t.Run("granted rooms with a bearer", func(t *testing.T) {
		tok := p.token(t, "ES256", "bob", time.Hour, []string{"orders"}, []string{"orders"})
		c := dialWS(t, p.pod, "Authorization", "Bearer "+tok)
		c.welcome("c4", boot1, map[string]string{"orders": ""})
		c.publish(wsclient.Publish{Room: "orders", Body: map[string]int{"n": 1}, Ref: "r1"})
		for {
			m := c.next()
			if m.Kind == "published" {
				if m.Ref != "r1" || m.Seq != 1 {
					t.Fatalf("published %+v", m)
				}
				break
			}
		}
	})
}

func TestWSUnknownKindKeepsTheConnection(t *testing.T) {
	p := newPod(t, podConfig{})
	c := dialWS(t, p)
	c.welcome("c", boot1, map[string]string{"a": ""})
	c.send(`{"v":1,"kind":"frobnicate","extra":[1,2]}`)
	m := c.next()
	if m.Kind != "error" || m.Error != "unknown_kind" || !strings.Contains(m.Message, `"frobnicate"`) {
		t.Fatalf("answer %+v", m)
	}
	c.send(`{"v":1,"kind":"ping","data":{"t":7},"unknown":true}`)
	if m := c.next(); m.Kind != "pong" || string(m.Data) != `{"t":7}` {
		t.Fatalf("answer %+v", m)
	}
	id := p.publish(t, "a", `1`)
	if m := c.next(); m.Kind != "event" || m.ID != id {
		t.Fatalf("event %+v", m)
	}
}

func TestWSReplayThenLiveForSeveralRooms(t *testing.T) {
	p := newPod(t, podConfig{history: 100})
	var aIDs, bIDs []string
	for i := 1; i <= 5; i++ {
		aIDs = append(aIDs, p.publish(t, "a", fmt.Sprint(i)))
		bIDs = append(bIDs, p.publish(t, "b", fmt.Sprint(10+i)))
	}
	p.publish(t, "c", `0`)
	c := dialWS(t, p)
	w := c.welcome("c", boot1, map[string]string{"a": aIDs[1], "b": "3", "c": ""})
	if w.Rooms["a"] != aIDs[1] || w.Rooms["b"] != "3" {
		t.Fatalf("welcome rooms %v", w.Rooms)
	}
	// Replay: a after 2, b after 3 (a bare seq in the current epoch); c is live only.
	want := map[string][]string{"a": aIDs[2:], "b": bIDs[3:]}
	got := map[string][]string{}
	for range 5 {
		m := c.next()
		if m.Kind != "event" {
			t.Fatalf("replay frame %+v", m)
		}
		got[m.Room] = append(got[m.Room], m.ID)
	}
	// Live, after the replay, in each room's order.
	for i := 6; i <= 8; i++ {
		want["a"] = append(want["a"], p.publish(t, "a", fmt.Sprint(i)))
		want["c"] = append(want["c"], p.publish(t, "c", fmt.Sprint(i)))
	}
	for range 6 {
		m := c.next()
		if m.Kind != "event" {
			t.Fatalf("live frame %+v", m)
		}
		got[m.Room] = append(got[m.Room], m.ID)
	}
	for room, ids := range want {
		if fmt.Sprint(got[room]) != fmt.Sprint(ids) {
			t.Fatalf("room %s: got %v, want %v", room, got[room], ids)
		}
	}
}

func TestWSResync(t *testing.T) {
	p := newPod(t, podConfig{history: 3})
	var last string
	for i := 1; i <= 10; i++ {
		last = p.publish(t, "r", fmt.Sprint(i))
	}
	epoch, _, _ := strings.Cut(last, ":")
	for _, tc := range []struct{ name, from string }{
		{"another epoch", "zzzz:5"},
		{"trimmed away", epoch + ":2"},
		{"ahead of the head", epoch + ":99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialWS(t, p)
			c.welcome("c-"+strings.ReplaceAll(tc.name, " ", "-"), boot1, map[string]string{"r": tc.from})
			m := c.next()
			if m.Kind != "resync" || m.Room != "r" || m.Epoch != epoch {
				t.Fatalf("want a resync of r in %s, got %+v", epoch, m)
			}
			// Whatever follows continues from the resync point without a hole, up
			// to a live event.
			id := p.publish(t, "r", `"live"`)
			for next := m.Seq + 1; ; next++ {
				e := c.next()
				if e.Kind != "event" || e.Seq != next || e.Epoch != epoch {
					t.Fatalf("after the resync at %d: %+v, want seq %d", m.Seq, e, next)
				}
				if e.ID == id {
					break
				}
			}
		})
	}
}

func TestWSShutdownCloses1001(t *testing.T) {
	p := newPod(t, podConfig{})
	c := dialWS(t, p)
	c.welcome("c", boot1, map[string]string{"a": "", "b": ""})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.rooms.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.wantClose(1001)
}

// TestWSPlainRequestIsRefusedBeforeItsCredential: a request that is not a WebSocket
// handshake (a plain GET, a HEAD) gets a JSON 426 and never redeems a ticket.
func TestWSPlainRequestIsRefusedBeforeItsCredential(t *testing.T) {
	keys := gatewaytest.NewKeys(t)
	p := newMemSecurePod(t, keys, gateway.Config{})
	tok := p.token(t, "RS256", "dave", time.Hour, []string{"orders"}, nil)
	ticket := p.ticket(t, tok)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		res := do(t, method, p.public.URL+"/ws?ticket="+ticket, "")
		if res.status != http.StatusUpgradeRequired {
			t.Fatalf("%s /ws: %d %s", method, res.status, res.body)
		}
		if method == http.MethodGet && !strings.Contains(res.body, `"upgrade_required"`) {
			t.Fatalf("GET /ws body %s", res.body)
		}
	}
	// The ticket is still good for the real handshake.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := wsclient.Dial(ctx, wsclient.URL(p.public.URL)+"?ticket="+ticket, wsclient.Options{})
	if err != nil {
		t.Fatalf("handshake with the ticket: %v", err)
	}
	wc := (&wsClient{}).start(t, c, true)
	wc.welcome("dave-rig", boot1, map[string]string{"orders": ""})
}

// TestWSBadHelloCodeWinsOverTheReaderEnding forces the order: the reader refuses a
// bad first frame and ends before the connection looks at the hello. The close is
// still 4400, every time.
func TestWSBadHelloCodeWinsOverTheReaderEnding(t *testing.T) {
	p := newPod(t, podConfig{})
	gateway.SetWSHelloAfterReader(p.srv)
	for range 20 {
		c := dialWS(t, p)
		c.send(`not json`)
		c.wantClose(4400)
	}
}
