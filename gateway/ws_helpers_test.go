package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
)

// wsMsg is a decoded server frame: the fields of every kind.
type wsMsg = wsclient.Frame

// wsClient is a WebSocket connection to a pod (wsclient.Conn), read in the
// background (unless opened with noRead) into frames, with the test's conveniences:
// each call fails the test when it cannot do its part.
type wsClient struct {
	t      testing.TB
	c      *wsclient.Conn
	frames chan wsMsg
	ended  chan struct{}
	err    error        // why reading ended; read after ended
	pings  atomic.Int64 // pings received from the server

	readStarted atomic.Bool
}

// dialWS opens GET /ws on the pod; headers come as name, value pairs. It fails the
// test unless the upgrade succeeds.
func dialWS(t testing.TB, p *pod, headers ...string) *wsClient {
	t.Helper()
	wc := &wsClient{}
	c, res, err := dialWSRaw(t, p.public.URL, &wc.pings, headers...)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial /ws: %v (status %d)", err, status)
	}
	return wc.start(t, c, true)
}

// dialWSRaw dials GET /ws at base, counting the server's pings in pings.
func dialWSRaw(t testing.TB, base string, pings *atomic.Int64, headers ...string) (*wsclient.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return wsclient.Dial(ctx, wsclient.URL(base), wsclient.Options{Header: h, OnPing: func() { pings.Add(1) }})
}

// start sets the client up on c; read starts its background reader.
func (wc *wsClient) start(t testing.TB, c *wsclient.Conn, read bool) *wsClient {
	wc.t, wc.c, wc.frames, wc.ended = t, c, make(chan wsMsg, 1<<12), make(chan struct{})
	if read {
		wc.startReading()
	}
	t.Cleanup(func() {
		_ = c.CloseNow()
		if wc.readStarted.Load() {
			<-wc.ended
		}
	})
	return wc
}

func (c *wsClient) read() {
	defer close(c.ended)
	defer close(c.frames)
	for {
		m, err := c.c.Read(context.Background())
		if err != nil {
			c.err = err
			return
		}
		c.frames <- m
	}
}

// startReading starts the background reader of a client opened without it.
func (c *wsClient) startReading() {
	c.readStarted.Store(true)
	go c.read()
}

// send writes one frame: a JSON value or raw text.
func (c *wsClient) send(v any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if s, ok := v.(string); ok {
		err = c.c.Write(ctx, []byte(s))
	} else {
		err = c.c.Send(ctx, v)
	}
	if err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// hello sends a hello for rooms (name → resume id).
func (c *wsClient) hello(client, boot string, rooms map[string]string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Hello(ctx, client, boot, rooms); err != nil {
		c.t.Fatalf("hello: %v", err)
	}
}

// ack acknowledges room's events up to id.
func (c *wsClient) ack(room, id string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Ack(ctx, room, id); err != nil {
		c.t.Fatalf("ack: %v", err)
	}
}

// publish sends a publish frame.
func (c *wsClient) publish(p wsclient.Publish) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Publish(ctx, p); err != nil {
		c.t.Fatalf("publish: %v", err)
	}
}

// welcome says hello and returns the welcome.
func (c *wsClient) welcome(client, boot string, rooms map[string]string) wsMsg {
	c.t.Helper()
	c.hello(client, boot, rooms)
	m := c.next()
	if m.Kind != wsclient.KindWelcome || m.V != wsclient.Version || m.Session == "" {
		c.t.Fatalf("want a welcome, got %+v", m)
	}
	return m
}

// next returns the next frame.
func (c *wsClient) next() wsMsg {
	c.t.Helper()
	select {
	case m, ok := <-c.frames:
		if !ok {
			c.t.Fatalf("connection ended while a frame was expected: %v", c.err)
		}
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("no frame within 10s")
	}
	return wsMsg{}
}

// closeStatus reads until the connection ends and returns its close code and the
// frames that came on the way.
func (c *wsClient) closeStatus() (websocket.StatusCode, string, []wsMsg) {
	c.t.Helper()
	var got []wsMsg
	for {
		select {
		case m, ok := <-c.frames:
			if !ok {
				code, reason := wsclient.CloseOf(c.err)
				if code == -1 {
					reason = fmt.Sprint(c.err)
				}
				return code, reason, got
			}
			got = append(got, m)
		case <-time.After(15 * time.Second):
			c.t.Fatal("the connection did not end within 15s")
		}
	}
}

// wantClose reads until the connection ends and checks its close code.
func (c *wsClient) wantClose(code websocket.StatusCode) []wsMsg {
	c.t.Helper()
	got, reason, frames := c.closeStatus()
	if got != code {
		c.t.Fatalf("closed with %d %q, want %d", got, reason, code)
	}
	return frames
}

// testBoot makes a UUIDv7 with the given Unix milliseconds.
func testBoot(ms int64, n int) string {
	return fmt.Sprintf("%08x-%04x-7%03x-8%03x-%012x", uint64(ms)>>16, uint64(ms)&0xffff, n&0xfff, n&0xfff, n)
}
