package deploy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
)

// TestNginxProxiesWebSocket runs nginx.conf in front of a stand-in upstream that
// accepts WebSocket connections on /ws and echoes one message: a client upgrades
// through nginx and gets its message back, so the upgrade headers pass.
func TestNginxProxiesWebSocket(t *testing.T) {
	needNginx(t)
	data, err := readBounded("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ws" {
			http.NotFound(w, r)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		_ = c.Write(r.Context(), typ, msg)
		_ = c.Close(websocket.StatusNormalClosure, "")
	}))
	defer up.Close()
	upAddr := strings.TrimPrefix(up.URL, "http://")
	addr, logs, stop, err := runNginx(func(listen string) string { return renderNginx(data, listen, upAddr) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := wsclient.Dial(ctx, wsclient.URL("http://"+addr), wsclient.Options{})
	if err != nil {
		t.Fatalf("upgrade through nginx: %v\n%s", err, logs())
	}
	defer c.CloseNow()
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.ReadRaw(ctx)
	if err != nil || string(got) != `{"v":1,"kind":"ping"}` {
		t.Fatalf("echo through nginx: %q, %v\n%s", got, err, logs())
	}
}
