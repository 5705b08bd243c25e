package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// What operators and limits do to WebSocket connections: closes with a mode, the
// liveness bound, the hello's agent, the protocol version after the hello, the
// rate limit and the per-user cap. Each runs on the path ROOMCAST_IDLE_LOOP picks.

// TestWSOperatorCloseModes: POST /admin/clients/{id}/close closes with 4409 by
// default and with mode=kick, with 1012 with mode=reconnect; another mode is a 400.
func TestWSOperatorCloseModes(t *testing.T) {
	p := newPod(t, podConfig{})
	for _, tc := range []struct {
		name, query string
		code        websocket.StatusCode
	}{
		{"default", "", 4409},
		{"kick", "?mode=kick", 4409},
		{"reconnect", "?mode=reconnect", 1012},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialWS(t, p)
			c.welcome("op-"+tc.name, boot1, map[string]string{"a": ""})
			res := do(t, http.MethodPost, p.admin.URL+"/admin/clients/op-"+tc.name+"/close"+tc.query, "")
			if res.status != http.StatusOK {
				t.Fatalf("close: %d %s", res.status, res.body)
			}
			c.wantClose(tc.code)
		})
	}
	t.Run("bad mode", func(t *testing.T) {
		c := dialWS(t, p)
		c.welcome("op-bad", boot1, map[string]string{"a": ""})
		res := do(t, http.MethodPost, p.admin.URL+"/admin/clients/op-bad/close?mode=later", "")
		var e struct{ Error, Message string }
		if res.status != http.StatusBadRequest || json.Unmarshal([]byte(res.body), &e) != nil || e.Error != "invalid_mode" || e.Message == "" {
			t.Fatalf("mode=later: %d %s, want 400 invalid_mode", res.status, res.body)
		}
		// The connection was left alone: it still answers.
		c.send(`{"v":1,"kind":"ping","data":7}`)
		if m := c.next(); m.Kind != "pong" {
			t.Fatalf("after a refused close: %+v", m)
		}
	})
}

// TestWSOperatorReconnectAcrossPods: a close with mode=reconnect asked of a pod that
// does not hold the client reaches the one that does, which closes with 1012.
func TestWSOperatorReconnectAcrossPods(t *testing.T) {
	owners := newFakeOwners()
	a := newOwnedPod(t, "pod-a", owners, 30*time.Second)
	b := newOwnedPod(t, "pod-b", owners, 30*time.Second)
	c := dialWS(t, a)
	c.welcome("far", boot1, map[string]string{"a": ""})
	res := do(t, http.MethodPost, b.admin.URL+"/admin/clients/far/close?mode=reconnect", "")
	if res.status != http.StatusAccepted {
		t.Fatalf("close from pod b: %d %s", res.status, res.body)
	}
	c.wantClose(1012)
}

// statsCounts reads the connection counts of /admin/stats.
func statsCounts(t testing.TB, p *pod) (connections, websockets int64) {
	t.Helper()
	res := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "")
	var st struct {
		Connections int64 `json:"connections"`
		WebSockets  int64 `json:"websockets"`
	}
	if res.status != http.StatusOK || json.Unmarshal([]byte(res.body), &st) != nil {
		t.Fatalf("/admin/stats: %d %s", res.status, res.body)
	}
	return st.Connections, st.WebSockets
}

// TestWSSilentPeerLeavesStatsWithinTheBound: a peer that completes its hello and
// then neither reads nor answers is out of /admin/stats within one ping interval,
// one pong timeout and one second of going silent.
func TestWSSilentPeerLeavesStatsWithinTheBound(t *testing.T) {
	const ping, pong = 300 * time.Millisecond, 400 * time.Millisecond
	const bound = ping + pong + time.Second
	p := newPod(t, podConfig{gw: gateway.Config{WSPing: ping, WSPongTimeout: pong}})
	r := dialRawWS(t, p)
	rawWelcome(t, r, "mute-bound")
	silent := time.Now() // from here the peer reads nothing and answers nothing
	if conns, ws := statsCounts(t, p); conns != 1 || ws != 1 {
		t.Fatalf("stats before: %d connections, %d websockets", conns, ws)
	}
	replaytest.Eventually(t, 10*time.Second, "the silent peer out of /admin/stats", func() bool {
		conns, ws := statsCounts(t, p)
		return conns == 0 && ws == 0
	})
	took := time.Since(silent)
	t.Logf("out of /admin/stats %s after going silent (bound %s)", took, bound)
	if took > bound {
		t.Fatalf("out of /admin/stats after %s, beyond ping + pong timeout + 1s = %s", took, bound)
	}
	if v := p.metrics(t).Value("roomcast_ws_closed_total", "code", "4408"); v != 1 {
		t.Fatalf("4408 closes counted: %v, want 1", v)
	}
}

// TestWSAnsweringPeerOutlivesThePongTimeout: a peer that answers every ping is
// served long after many pong timeouts.
func TestWSAnsweringPeerOutlivesThePongTimeout(t *testing.T) {
	const ping, pong = 50 * time.Millisecond, 100 * time.Millisecond
	p := newPod(t, podConfig{gw: gateway.Config{WSPing: ping, WSPongTimeout: pong}})
	c := dialWS(t, p)
	c.welcome("chatty", boot1, map[string]string{"a": ""})
	replaytest.Eventually(t, 10*time.Second, "ten pings answered", func() bool { return c.pings.Load() >= 10 })
	id := p.publish(t, "a", `1`)
	if m := c.next(); m.Kind != "event" || m.ID != id {
		t.Fatalf("got %+v", m)
	}
}

// TestWSHelloAgent: a hello's agent shows in /admin/clients/{id} and in the
// connection's close line; one too long or not printable ASCII is a bad hello
// (4400).
func TestWSHelloAgent(t *testing.T) {
	logger, logs := captureLog()
	p := newPod(t, podConfig{gw: gateway.Config{PodID: "pod-agent", Logger: logger}})
	c := dialWS(t, p)
	hello := func(client, agent string) string {
		b, _ := json.Marshal(map[string]any{"v": 1, "kind": "hello", "client": client, "boot": boot1, "rooms": map[string]string{"a": ""}, "agent": agent})
		return string(b)
	}
	c.send(hello("versioned", "rig/1.4.2 (linux; go1.26)"))
	if m := c.next(); m.Kind != "welcome" {
		t.Fatalf("want the welcome, got %+v", m)
	}
	if status, ci := p.client(t, "versioned"); status != http.StatusOK || ci.Agent != "rig/1.4.2 (linux; go1.26)" {
		t.Fatalf("/admin/clients/versioned: %d agent %q", status, ci.Agent)
	}
	if res := do(t, http.MethodPost, p.admin.URL+"/admin/clients/versioned/close", ""); res.status != http.StatusOK {
		t.Fatalf("close: %d %s", res.status, res.body)
	}
	c.wantClose(4409)
	wantLogged(t, logs, "websocket client closed", map[string]string{"code": "4409", "client": "versioned", "agent": "rig/1.4.2 (linux; go1.26)", "pod": "pod-agent"})
	for name, agent := range map[string]string{
		"65 characters": strings.Repeat("a", 65),
		"a newline":     "rig/1\n",
		"not ASCII":     "rig/é",
	} {
		t.Run(name, func(t *testing.T) {
			bad := dialWS(t, p)
			bad.send(hello("bad-agent", agent))
			bad.wantClose(4400)
		})
	}
	t.Run("64 characters", func(t *testing.T) {
		ok := dialWS(t, p)
		ok.send(hello("long-agent", strings.Repeat("a", 64)))
		if m := ok.next(); m.Kind != "welcome" {
			t.Fatalf("want the welcome, got %+v", m)
		}
	})
}

// TestWSOtherVersionAfterTheHelloCloses: after the hello, a frame whose "v" is not
// 1 (or that has none) closes the connection with 4400.
func TestWSOtherVersionAfterTheHelloCloses(t *testing.T) {
	p := newPod(t, podConfig{})
	for name, frame := range map[string]string{
		"v 2":  `{"v":2,"kind":"ping"}`,
		"no v": `{"kind":"ping"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := dialWS(t, p)
			c.welcome("v-"+strings.ReplaceAll(name, " ", ""), boot1, map[string]string{"a": ""})
			c.send(frame)
			for _, m := range c.wantClose(4400) {
				if m.Kind == "error" {
					t.Fatalf("an error frame before the close: %+v", m)
				}
			}
		})
	}
}

// TestWSRateLimit: a client over its rate gets one rate_limited error, its
// messages over the limit are dropped, and one that goes on is closed with 1008.
// Messages within the burst are all served.
func TestWSRateLimit(t *testing.T) {
	const burst = 5
	logger, logs := captureLog()
	p := newPod(t, podConfig{gw: gateway.Config{WSRate: 2, WSBurst: burst, Logger: logger}})
	c := dialWS(t, p)
	c.welcome("flood", boot1, map[string]string{"a": ""})
	for i := range burst {
		c.send(fmt.Sprintf(`{"v":1,"kind":"ping","data":%d}`, i))
	}
	for i := range burst {
		if m := c.next(); m.Kind != "pong" || string(m.Data) != fmt.Sprint(i) {
			t.Fatalf("frame %d within the burst: %+v", i, m)
		}
	}
	// Over the limit from here on: the client keeps sending until it is closed.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := c.c.Write(t.Context(), []byte(`{"v":1,"kind":"ping","data":"x"}`)); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	frames := c.wantClose(1008)
	close(stop)
	<-done
	errs, pongs := 0, 0
	for _, m := range frames {
		switch {
		case m.Kind == "error" && m.Error == "rate_limited":
			errs++
		case m.Kind == "pong":
			pongs++
		default:
			t.Fatalf("unexpected frame %+v", m)
		}
	}
	if errs != 1 {
		t.Fatalf("%d rate_limited errors, want 1 (frames %+v)", errs, frames)
	}
	mt := p.metrics(t)
	if mt.Value("roomcast_ws_rate_limited_total", "outcome", "warned") != 1 || mt.Value("roomcast_ws_rate_limited_total", "outcome", "closed") != 1 {
		t.Fatalf("roomcast_ws_rate_limited_total: warned %v, closed %v", mt.Value("roomcast_ws_rate_limited_total", "outcome", "warned"), mt.Value("roomcast_ws_rate_limited_total", "outcome", "closed"))
	}
	wantLogged(t, logs, "websocket client closed", map[string]string{"code": "1008", "client": "flood"})
	t.Logf("served %d pongs refilled at 2/s after the burst", pongs)
}

// TestWSAcksAreNotRateLimited: a client may acknowledge every event however fast
// they come; its acks take nothing from its bucket.
func TestWSAcksAreNotRateLimited(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{WSRate: 1, WSBurst: 1}})
	c := dialWS(t, p)
	c.welcome("acker-fast", boot1, map[string]string{"a": ""})
	for i := range 10 {
		p.publish(t, "a", fmt.Sprint(i))
	}
	for range 10 {
		m := c.next()
		if m.Kind != "event" {
			t.Fatalf("want an event, got %+v", m)
		}
		c.ack("a", m.ID)
	}
	// The bucket is still full: a ping is answered, with no error before it.
	c.send(`{"v":1,"kind":"ping","data":1}`)
	if m := c.next(); m.Kind != "pong" {
		t.Fatalf("after ten acks: %+v, want the pong", m)
	}
}

// TestMaxStreamsPerUser: one user (sub) holds at most --max-streams-per-user
// streams, multiplexed streams and WebSocket connections on the pod, together;
// another user and anonymous clients are not held back by it, and a place freed is
// taken again.
func TestMaxStreamsPerUser(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{MaxStreamsPerUser: 2})
	ana := p.token(t, "RS256", "ana", time.Hour, []string{"*"}, nil)
	bob := p.token(t, "RS256", "bob", time.Hour, []string{"*"}, nil)
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

	s1 := p.subscribe(t, "r1", "", bearer(ana)...)
	expectAnchor(t, s1)
	ws := dialWS(t, p.pod, bearer(ana)...)
	ws.welcome("ana-rig", boot1, map[string]string{"r2": ""})

	// A third connection of ana's, of each kind, is turned away.
	turned := openStreamAt(t, p.public.URL+"/events?room=r3&room=r4", bearer(ana)...)
	if frames := turned.waitEnd(); len(frames) != 1 || frames[0].hasID {
		t.Fatalf("ana's multiplexed stream: %+v, want only a retry hint and the end", frames)
	}
	_, res, err := dialWSRaw(t, p.public.URL, new(atomic.Int64), bearer(ana)...)
	if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("ana's second WebSocket: %v, %v; want 503", err, res)
	}
	// Bob and anonymous clients are not held back.
	expectAnchor(t, p.subscribe(t, "r1", "", bearer(bob)...))
	expectAnchor(t, p.subscribe(t, "public.news", ""))
	expectAnchor(t, p.subscribe(t, "public.news", ""))
	if got := p.metrics(t).Value("roomcast_streams_rejected_total", "reason", "user"); got != 2 {
		t.Fatalf("roomcast_streams_rejected_total{reason=user} = %v, want 2", got)
	}
	// A place ana frees is hers again.
	s1.close()
	replaytest.Eventually(t, 10*time.Second, "ana's place freed", func() bool {
		s := p.subscribe(t, "r1", "", bearer(ana)...)
		defer s.close()
		s.nextAny() // the retry hint
		f, ok := s.nextAny()
		return ok && f.hasID // the anchor: admitted
	})
	// So is the place of a WebSocket connection that ended: with ana at her cap
	// again, a WebSocket connection is refused until her first one ends.
	// (The streams that probed for her freed place may take a moment to end.)
	replaytest.Eventually(t, 10*time.Second, "ana at her cap again", func() bool {
		s := p.subscribe(t, "r1", "", bearer(ana)...)
		s.nextAny() // the retry hint
		if f, ok := s.nextAny(); ok && f.hasID {
			t.Cleanup(s.close) // held to the end: ana's second place
			return true
		}
		s.close()
		return false
	})
	if _, res, err := dialWSRaw(t, p.public.URL, new(atomic.Int64), bearer(ana)...); err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("ana's WebSocket at her cap: %v, %v; want 503", err, res)
	}
	_ = ws.c.CloseNow()
	replaytest.Eventually(t, 10*time.Second, "ana's WebSocket place freed", func() bool {
		c, _, err := dialWSRaw(t, p.public.URL, new(atomic.Int64), bearer(ana)...)
		if err != nil {
			return false
		}
		_ = c.CloseNow()
		return true
	})
}
