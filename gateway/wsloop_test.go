package gateway_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/polltest"
)

// The framing of WebSocket connections as a peer can split, interleave and break
// it. The loop's parser (wsParser) is what they exercise when the pods serve their
// connections on the idle loop; the library's path must behave the same where
// RFC 6455 says how.

const rawWait = 10 * time.Second

// dialRawWS upgrades GET /ws on the pod with a client that writes frames byte by byte.
func dialRawWS(t testing.TB, p *pod) *wsclient.Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rawWait)
	defer cancel()
	r, err := wsclient.DialRaw(ctx, wsclient.URL(p.public.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// rawHello is client's hello for room a, as one text frame.
func rawHello(client string) []byte {
	return wsclient.Text(fmt.Sprintf(`{"v":1,"kind":"hello","client":%q,"boot":%q,"rooms":{"a":""}}`, client, boot1))
}

// rawWrite writes b, failing t.
func rawWrite(t testing.TB, r *wsclient.Raw, b []byte) {
	t.Helper()
	if err := r.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// rawNext reads the server's next frame, skipping its pings, and decodes a text
// frame's message (a control frame's kind is left empty).
func rawNext(t testing.TB, r *wsclient.Raw) (wsclient.RawFrame, wsMsg) {
	t.Helper()
	for {
		f, err := r.Read(rawWait)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		switch f.Op {
		case ws.OpPing:
			continue
		case ws.OpText:
			m, err := wsclient.Decode(f.Payload)
			if err != nil {
				t.Fatalf("decode %q: %v", f.Payload, err)
			}
			return f, m
		}
		return f, wsMsg{}
	}
}

// rawWelcome says hello as client and reads the welcome.
func rawWelcome(t testing.TB, r *wsclient.Raw, client string) {
	t.Helper()
	rawWrite(t, r, rawHello(client))
	if _, m := rawNext(t, r); m.Kind != wsclient.KindWelcome {
		t.Fatalf("want the welcome, got %+v", m)
	}
}

// A client whose frames reach the server one byte per write is served as one that
// writes them whole: the hello, then a ping whose pong carries its data.
func TestWSFramesSplitIntoSingleBytes(t *testing.T) {
	p := newPod(t, podConfig{})
	r := dialRawWS(t, p)
	for _, b := range rawHello("bytewise") {
		rawWrite(t, r, []byte{b})
	}
	if _, m := rawNext(t, r); m.Kind != wsclient.KindWelcome {
		t.Fatalf("want the welcome, got %+v", m)
	}
	// A frame with a 16-bit length, so that its header arrives in pieces too.
	data := `"` + strings.Repeat("x", 300) + `"`
	for _, b := range wsclient.Text(`{"v":1,"kind":"ping","data":` + data + `}`) {
		rawWrite(t, r, []byte{b})
	}
	if _, m := rawNext(t, r); m.Kind != wsclient.KindPong || string(m.Data) != data {
		t.Fatalf("want the pong with its data, got %+v", m)
	}
}

// A ping between the fragments of a message is answered at once, and the message
// is served once its last fragment arrives.
func TestWSPingBetweenFragments(t *testing.T) {
	p := newPod(t, podConfig{})
	r := dialRawWS(t, p)
	rawWelcome(t, r, "fragments")
	msg := []byte(`{"v":1,"kind":"ping","data":"whole"}`)
	rawWrite(t, r, wsclient.ClientFrame(ws.OpText, false, msg[:10], false))
	rawWrite(t, r, wsclient.ClientFrame(ws.OpPing, true, []byte("mid"), false))
	rawWrite(t, r, wsclient.ClientFrame(ws.OpContinuation, false, msg[10:20], false))
	rawWrite(t, r, wsclient.ClientFrame(ws.OpContinuation, true, msg[20:], false))
	if f, _ := rawNext(t, r); f.Op != ws.OpPong || string(f.Payload) != "mid" {
		t.Fatalf("want the pong of the ping between the fragments, got op %#x %q", f.Op, f.Payload)
	}
	if _, m := rawNext(t, r); m.Kind != wsclient.KindPong || string(m.Data) != `"whole"` {
		t.Fatalf("want the message's pong, got %+v", m)
	}
}

// Frames RFC 6455 forbids close the connection with the code it names.
func TestWSBrokenFramesClose(t *testing.T) {
	const maxBody = 1 << 10
	huge := wsclient.ClientFrame(ws.OpText, true, nil, false)[:2]
	huge[1] = 0x80 | 127
	huge = binary.BigEndian.AppendUint64(huge, maxBody+64<<10)
	huge = append(huge, 1, 2, 3, 4) // the mask; no payload follows
	rsv := wsclient.Text(`{"v":1,"kind":"ping"}`)
	rsv[0] |= 0x40
	cases := []struct {
		name string
		// loopOnly: the library's path ends the connection otherwise (it drops
		// an unmasked frame's connection without a close, waits for an oversized
		// frame's payload before it refuses it, and leaves UTF-8 to the frame's
		// decoding, which answers with an error frame).
		loopOnly bool
		frame    []byte
		code     int
	}{
		{name: "unmasked", loopOnly: true, frame: wsclient.ClientFrame(ws.OpText, true, []byte(`{"v":1,"kind":"ping"}`), true), code: 1002},
		{name: "larger than the read limit", loopOnly: true, frame: huge, code: 1009},
		{name: "reserved bit", frame: rsv, code: 1002},
		{name: "continuation of nothing", frame: wsclient.ClientFrame(ws.OpContinuation, true, []byte("x"), false), code: 1002},
		{name: "fragmented ping", frame: wsclient.ClientFrame(ws.OpPing, false, nil, false), code: 1002},
		{name: "invalid UTF-8", loopOnly: true, frame: wsclient.ClientFrame(ws.OpText, true, []byte{'"', 0xff, 0xfe, '"'}, false), code: 1007},
	}
	p := newPod(t, podConfig{gw: gateway.Config{MaxBody: maxBody}})
	// The goroutine path's library answers these otherwise (see its cases): they
	// are checked on a pod on the loop, whatever the tests' path.
	onLoop := p
	if gateway.IdleLoopSupported {
		onLoop = newPod(t, podConfig{gw: gateway.Config{MaxBody: maxBody, IdleLoop: gateway.IdleLoopOn}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := p
			if tc.loopOnly {
				if !gateway.IdleLoopSupported {
					t.Skip("the idle loop needs Linux")
				}
				p = onLoop
			}
			r := dialRawWS(t, p)
			rawWelcome(t, r, "broken-"+strings.ReplaceAll(tc.name, " ", "-"))
			rawWrite(t, r, tc.frame)
			code, _, err := r.CloseCode(rawWait)
			if err != nil || code != tc.code {
				t.Fatalf("closed with %d (%v), want %d", code, err, tc.code)
			}
		})
	}
}

// A peer that answers no ping and sends nothing is closed with 4408 by the
// connection's timers, after a ping it did not answer within the pong timeout.
func TestWSUnansweredPingsClose(t *testing.T) {
	const ping, pong = 100 * time.Millisecond, 150 * time.Millisecond
	p := newPod(t, podConfig{gw: gateway.Config{WSPing: ping, WSPongTimeout: pong}})
	r := dialRawWS(t, p)
	start := time.Now()
	rawWelcome(t, r, "mute")
	code, before, err := r.CloseCode(rawWait)
	if err != nil || code != 4408 {
		t.Fatalf("closed with %d (%v), want 4408", code, err)
	}
	if took := time.Since(start); took < pong {
		t.Fatalf("closed after %s, before a ping's pong timeout", took)
	}
	pings := 0
	for _, f := range before {
		if f.Op == ws.OpPing {
			pings++
		}
	}
	if pings == 0 {
		t.Fatal("no ping before the close")
	}
}

// Frames a client sends in the same write as its hello are served after the
// welcome, in their order, the publish among them included.
func TestWSFramesPipelinedAfterTheHello(t *testing.T) {
	p := newPod(t, podConfig{})
	r := dialRawWS(t, p)
	var b []byte
	b = append(b, rawHello("pipeliner")...)
	b = append(b, wsclient.Text(`{"v":1,"kind":"publish","room":"a","body":{"n":1},"ref":"r1"}`)...)
	b = append(b, wsclient.Text(`{"v":1,"kind":"ping","data":1}`)...)
	b = append(b, wsclient.Text(`{"v":1,"kind":"ack","room":"nope","id":"x:1"}`)...)
	b = append(b, wsclient.Text(`{"v":1,"kind":"ping","data":2}`)...)
	rawWrite(t, r, b)
	var kinds []string
	for len(kinds) < 5 {
		_, m := rawNext(t, r)
		if m.Kind == wsclient.KindEvent {
			continue // the publish's own event, whenever it comes
		}
		kinds = append(kinds, m.Kind+string(m.Data)+m.Ref)
	}
	want := []string{"welcome", "publishedr1", "pong1", "error", "pong2"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("frames %q, want %q", kinds, want)
	}
}

// Idle WebSocket connections on the idle loop hold no goroutine each.
func TestWSIdleConnectionsHoldNoGoroutines(t *testing.T) {
	if !gateway.IdleLoopSupported {
		t.Skip("the idle loop needs Linux")
	}
	const n = 500
	p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: gateway.IdleLoopOn}})
	before := runtime.NumGoroutine()
	conns := make([]*wsclient.Raw, n)
	for i := range conns {
		conns[i] = dialRawWS(t, p)
		rawWelcome(t, conns[i], fmt.Sprintf("idle-%d", i))
	}
	polltest.Eventually(t, rawWait, "the connections' goroutines gone", func() bool {
		return runtime.NumGoroutine()-before < n/10
	})
	t.Logf("%d goroutines for %d idle connections", runtime.NumGoroutine()-before, n)
	// They are live: one publish reaches each.
	id := p.publish(t, "a", `1`)
	for i, r := range conns {
		if _, m := rawNext(t, r); m.Kind != wsclient.KindEvent || m.ID != id {
			t.Fatalf("connection %d: want event %s, got %+v", i, id, m)
		}
	}
}

// Publishes are served in the order they came, and the frames behind them wait
// their turn: while the log holds the first, more frames arrive than a connection
// queues (it stops reading, and reads on as they drain), and every answer comes,
// in order, once the log takes them.
func TestWSPublishesQueuedInOrderWhileTheLogWaits(t *testing.T) {
	const n = 100 // more than the connection queues
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	log := &gatedLog{MemoryLog: mem, entered: make(chan struct{}, n+1), gate: make(chan struct{})}
	p := newPodOn(t, log, podConfig{gw: gateway.Config{PublishTimeout: time.Minute}})
	r := dialRawWS(t, p)
	rawWelcome(t, r, "queued")
	var b []byte
	for i := range n {
		b = append(b, wsclient.Text(fmt.Sprintf(`{"v":1,"kind":"publish","room":"a","body":%d,"ref":"r%d"}`, i, i))...)
	}
	b = append(b, wsclient.Text(`{"v":1,"kind":"ping","data":"last"}`)...)
	rawWrite(t, r, b)
	<-log.entered // the first publish waits in the log
	close(log.gate)
	for i := range n {
		_, m := rawNext(t, r)
		for m.Kind == wsclient.KindEvent {
			_, m = rawNext(t, r)
		}
		if m.Kind != wsclient.KindPublished || m.Ref != fmt.Sprintf("r%d", i) {
			t.Fatalf("answer %d: %+v", i, m)
		}
	}
	for {
		if _, m := rawNext(t, r); m.Kind != wsclient.KindEvent {
			if m.Kind != wsclient.KindPong || string(m.Data) != `"last"` {
				t.Fatalf("want the pong after the publishes, got %+v", m)
			}
			return
		}
	}
}
