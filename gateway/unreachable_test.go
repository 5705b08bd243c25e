package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestRedisDownSaidPlainly: with its Redis stopped, a pod says so in words a person
// reads, naming the backend and its address and never the password it connects with:
// a stream ends with a comment line saying the event log is unreachable, before its
// retry hint; a publish is 503 naming redis and the address; a WebSocket connection
// is closed with a reason that names them too.
func TestRedisDownSaidPlainly(t *testing.T) {
	const password = "unreachable-test-pw"
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(aclFile, []byte("user default off\nuser roomcast on >"+password+" ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile})
	// WebSocket client ids are kept in memory, so that a hello gets as far as
	// joining its rooms, which needs the log.
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close(context.Background()) })
	ctl, _ := replay.ControlOf(mem)
	p := newFleetPod(t, srv, replay.RedisConfig{Username: "roomcast", Password: password,
		Timeout: 300 * time.Millisecond, HealthInterval: 50 * time.Millisecond},
		podConfig{gw: gateway.Config{Owners: ctl.Owners, Notices: ctl.Notices}})
	room := redistest.Prefix(t)
	id := p.publish(t, room, `{"i":1}`) // the pod is connected

	proc, err := os.FindProcess(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	want := "the event log (redis at " + srv.Addr + ") is unreachable"

	// A resuming stream of the room the pod knew, and a new one: whether the join or
	// the read of the history fails, the stream says why before its retry hint, and
	// ends.
	for _, tc := range []struct{ name, room, lastID string }{
		{"resuming", room, id},
		{"new room", room + ".other", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *stream
			if tc.lastID != "" {
				s = p.subscribe(t, tc.room, "", "Last-Event-ID", tc.lastID)
			} else {
				s = p.subscribe(t, tc.room, "")
			}
			frames := s.waitEnd()
			if s.res.StatusCode != http.StatusOK || len(frames) == 0 {
				t.Fatalf("stream: %d %+v, want 200 and an end", s.res.StatusCode, frames)
			}
			last := frames[len(frames)-1]
			if !strings.HasPrefix(last.comment, want) || !strings.HasSuffix(last.comment, "; retry in a few seconds") || last.retry == 0 {
				t.Fatalf("last frame %+v, want the comment %q… and a retry hint", last, want)
			}
			for _, f := range frames {
				if strings.Contains(f.comment+f.data, password) {
					t.Fatalf("the stream holds the password: %+v", f)
				}
			}
		})
	}

	// The first publish on a connection the server dropped may read EOF after
	// writing: its outcome is unknown, and the answer names the backend too. The
	// publishes after it are never sent: unavailable.
	unknownSaid := func(t *testing.T, msg string) bool {
		t.Helper()
		if !strings.HasPrefix(msg, "the event may have been published: its outcome is unknown (the event log, redis at "+srv.Addr+": ") {
			t.Fatalf("outcome unknown: %q", msg)
		}
		return true
	}
	t.Run("publish", func(t *testing.T) {
		for i := 0; ; i++ {
			res := do(t, http.MethodPost, p.public.URL+"/rooms/"+room+"/events", `{"i":2}`, "Content-Type", "application/json")
			var body struct{ Error, Message string }
			_ = json.Unmarshal([]byte(res.body), &body)
			if body.Error == "outcome_unknown" && i < 20 && unknownSaid(t, body.Message) {
				continue
			}
			assertError(t, res, http.StatusServiceUnavailable, "unavailable")
			if !strings.HasPrefix(body.Message, "the event log (redis at "+srv.Addr+") is unavailable: ") ||
				!strings.HasSuffix(body.Message, "; the event was not published; retry later") ||
				strings.Contains(res.body, password) || res.header.Get("Retry-After") == "" {
				t.Fatalf("publish with redis down: %s (Retry-After %q)", res.body, res.header.Get("Retry-After"))
			}
			break
		}
	})

	t.Run("batch", func(t *testing.T) {
		for i := 0; ; i++ {
			res := do(t, http.MethodPost, p.public.URL+"/events", `[{"room":"`+room+`","body":1}]`, "Content-Type", "application/json")
			var items []struct {
				Status         int
				Error, Message string
			}
			if err := json.Unmarshal([]byte(res.body), &items); err != nil || len(items) != 1 {
				t.Fatalf("batch with redis down: %d %s", res.status, res.body)
			}
			if items[0].Error == "outcome_unknown" && i < 20 && unknownSaid(t, items[0].Message) {
				continue
			}
			if items[0].Status != http.StatusServiceUnavailable || items[0].Error != "unavailable" ||
				!strings.HasPrefix(items[0].Message, "the event log (redis at "+srv.Addr+") is unavailable: ") || strings.Contains(res.body, password) {
				t.Fatalf("batch with redis down: %d %s", res.status, res.body)
			}
			break
		}
	})

	t.Run("websocket", func(t *testing.T) {
		ws := dialWS(t, p)
		ws.hello("rc-down", testBoot(time.Now().UnixMilli(), 1), map[string]string{room + ".ws": ""})
		code, reason, _ := ws.closeStatus()
		if code != websocket.StatusTryAgainLater || !strings.HasPrefix(reason, want) || len(reason) > 123 || strings.Contains(reason, password) {
			t.Fatalf("closed with %d %q, want %d and %q…", code, reason, websocket.StatusTryAgainLater, want)
		}
	})
}

// TestFleetStoresDownSaidPlainly: the fleet's stores on Redis (here the client
// registry, for a look-up and for a close) answer 503 naming the store, redis and its address when Redis is gone,
// never the password.
func TestFleetStoresDownSaidPlainly(t *testing.T) {
	const password = "stores-test-pw"
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(aclFile, []byte("user default off\nuser roomcast on >"+password+" ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile})
	p := newFleetPod(t, srv, replay.RedisConfig{Username: "roomcast", Password: password,
		Timeout: 300 * time.Millisecond, HealthInterval: 50 * time.Millisecond}, podConfig{})
	p.publish(t, redistest.Prefix(t), `{"i":1}`) // the pod is connected
	proc, err := os.FindProcess(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, method, path, body, store string }{
		{"client registry", http.MethodGet, "/admin/clients/rig-1", "", "client registry"},
		{"client close", http.MethodPost, "/admin/clients/rig-1/close", "", "client registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, tc.method, p.admin.URL+tc.path, tc.body, "Content-Type", "application/json")
			var body struct{ Error, Message string }
			_ = json.Unmarshal([]byte(res.body), &body)
			if res.status != http.StatusServiceUnavailable || body.Error != "unavailable" ||
				!strings.HasPrefix(body.Message, "the "+tc.store+" (redis at "+srv.Addr+") is unavailable: ") ||
				strings.Contains(res.body, password) {
				t.Fatalf("%s %s with redis down: %d %s", tc.method, tc.path, res.status, res.body)
			}
		})
	}
}
