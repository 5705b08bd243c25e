package wsclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestURL(t *testing.T) {
	for base, want := range map[string]string{
		"http://127.0.0.1:8080":     "ws://127.0.0.1:8080/ws",
		"http://127.0.0.1:8080/":    "ws://127.0.0.1:8080/ws",
		"https://rooms.example.com": "wss://rooms.example.com/ws",
	} {
		if got := URL(base); got != want {
			t.Errorf("URL(%q) = %q, want %q", base, got, want)
		}
	}
}

// TestConn: the client's frames reach the server as the protocol spells them, the
// server's decode, the server's pings are counted, and the close code comes back.
func TestConn(t *testing.T) {
	got := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		for range 4 {
			_, p, err := c.Read(ctx)
			if err != nil {
				return
			}
			got <- string(p)
		}
		ctx = c.CloseRead(ctx)              // reads on, for the pong
		if err := c.Ping(ctx); err != nil { // answered once the client reads
			return
		}
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"v":1,"kind":"event","id":"e:2","room":"r","epoch":"e","seq":2,"ts":5,"type":"message","body":{"a":1}}`))
		_ = c.Write(ctx, websocket.MessageText, []byte(`not json`))
		_ = c.Close(4409, "superseded")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, res, err := Dial(ctx, URL(srv.URL), Options{}); err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a refused upgrade: %v, %v; want the error with its 401", err, res)
	}
	pings := 0
	c, _, err := Dial(ctx, URL(srv.URL), Options{Header: http.Header{"Authorization": {"Bearer k"}}, OnPing: func() { pings++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, send := range []func() error{
		func() error { return c.Hello(ctx, "rig-1", "b", map[string]string{"r": "e:1"}) },
		func() error { return c.Ack(ctx, "r", "e:2") },
		func() error { return c.Publish(ctx, Publish{Room: "r", Body: map[string]int{"x": 1}, Ref: "p1"}) },
		func() error { return c.Ping(ctx, json.RawMessage(`7`)) },
	} {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		`{"boot":"b","client":"rig-1","kind":"hello","rooms":{"r":"e:1"},"v":1}`,
		`{"v":1,"kind":"ack","room":"r","id":"e:2"}`,
		`{"v":1,"kind":"publish","room":"r","body":{"x":1},"ref":"p1"}`,
		`{"v":1,"kind":"ping","data":7}`,
	} {
		if g := <-got; g != want {
			t.Errorf("sent %s, want %s", g, want)
		}
	}
	f, err := c.Read(ctx)
	if err != nil || f.Kind != KindEvent || f.ID != "e:2" || f.Seq != 2 || f.TS != 5 || string(f.Body) != `{"a":1}` {
		t.Fatalf("read %+v, %v", f, err)
	}
	if pings != 1 {
		t.Errorf("%d pings counted, want 1", pings)
	}
	if _, err := c.Read(ctx); !errors.Is(err, ErrNotAFrame) {
		t.Fatalf("a message that is not JSON: %v, want ErrNotAFrame", err)
	}
	_, err = c.Read(ctx)
	if code, reason := CloseOf(err); code != 4409 || reason != "superseded" || Retryable(code) {
		t.Fatalf("closed with %d %q (retryable %t), want 4409 superseded, for good", code, reason, Retryable(code))
	}
	if code, _ := CloseOf(errors.New("broken")); code != -1 || !Retryable(code) {
		t.Errorf("a broken connection: %d, want -1 and retryable", code)
	}
}
