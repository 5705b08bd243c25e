package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsMsg is a decoded server frame: the fields of every kind.
type wsMsg struct {
	V       int               `json:"v"`
	Kind    string            `json:"kind"`
	Session string            `json:"session"`
	Rooms   map[string]string `json:"rooms"`
	Room    string            `json:"room"`
	ID      string            `json:"id"`
	Epoch   string            `json:"epoch"`
	Seq     uint64            `json:"seq"`
	TS      int64             `json:"ts"`
	Type    string            `json:"type"`
	Body    json.RawMessage   `json:"body"`
	Fork    bool              `json:"fork"`
	Ref     string            `json:"ref"`
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Data    json.RawMessage   `json:"data"`
}

// wsClient is a WebSocket connection to a pod, read in the background (unless
// opened with noRead) into frames.
type wsClient struct {
	t      testing.TB
	c      *websocket.Conn
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
func dialWSRaw(t testing.TB, base string, pings *atomic.Int64, headers ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/ws", &websocket.DialOptions{
		HTTPHeader:     h,
		OnPingReceived: func(context.Context, []byte) bool { pings.Add(1); return true },
	})
	if c != nil {
		c.SetReadLimit(1 << 20)
	}
	return c, res, err
}

// start sets the client up on c; read starts its background reader.
func (wc *wsClient) start(t testing.TB, c *websocket.Conn, read bool) *wsClient {
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
		_, p, err := c.c.Read(context.Background())
		if err != nil {
			c.err = err
			return
		}
		var m wsMsg
		if err := json.Unmarshal(p, &m); err != nil {
			c.err = fmt.Errorf("frame %q: %w", p, err)
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
	var p []byte
	switch v := v.(type) {
	case string:
		p = []byte(v)
	default:
		var err error
		if p, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, p); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// hello sends a hello for rooms (name → resume id).
func (c *wsClient) hello(client, boot string, rooms map[string]string) {
	c.t.Helper()
	c.send(map[string]any{"v": 1, "kind": "hello", "client": client, "boot": boot, "rooms": rooms})
}

// welcome says hello and returns the welcome.
func (c *wsClient) welcome(client, boot string, rooms map[string]string) wsMsg {
	c.t.Helper()
	c.hello(client, boot, rooms)
	m := c.next()
	if m.Kind != "welcome" || m.V != 1 || m.Session == "" {
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
				var ce websocket.CloseError
				if errors.As(c.err, &ce) {
					return ce.Code, ce.Reason, got
				}
				return -1, fmt.Sprint(c.err), got
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
