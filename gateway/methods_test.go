package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// TestHead: HEAD works wherever GET does; a HEAD of a stream answers the stream's
// headers without joining the room.
func TestHead(t *testing.T) {
	p := newPod(t, podConfig{})
	for _, url := range []string{
		p.public.URL + "/healthz", p.public.URL + "/readyz", p.public.URL + "/", p.public.URL + "/roomcast.js",
		p.admin.URL + "/admin/stats", p.admin.URL + "/metrics", p.admin.URL + "/",
	} {
		res := do(t, http.MethodHead, url, "")
		if res.status != http.StatusOK || res.body != "" {
			t.Errorf("HEAD %s: %d %q", url, res.status, res.body)
		}
	}
	res := do(t, http.MethodHead, p.public.URL+"/rooms/r/events", "")
	if res.status != http.StatusOK || res.body != "" || res.header.Get("Content-Type") != "text/event-stream; charset=utf-8" ||
		res.header.Get("Cache-Control") != "no-cache" || res.header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("HEAD of a stream: %d %v %q", res.status, res.header, res.body)
	}
	if res := do(t, http.MethodHead, p.public.URL+"/rooms/a%7Bb/events", ""); res.status != http.StatusBadRequest {
		t.Fatalf("HEAD of a bad room: %d", res.status)
	}
	m := do(t, http.MethodGet, p.admin.URL+"/metrics", "").body
	if !strings.Contains(m, `roomcast_streams_opened_total{resumed="false"} 0`) || p.rooms.Len() != 0 {
		t.Fatalf("a HEAD opened a stream: %d members", p.rooms.Len())
	}
}

// TestMethodNotAllowed: a 405 names the route's methods in Allow.
func TestMethodNotAllowed(t *testing.T) {
	p := newPod(t, podConfig{})
	cases := []struct {
		method, url, allow string
	}{
		{http.MethodDelete, p.public.URL + "/rooms/r/events", "GET, HEAD, POST"},
		{http.MethodPut, p.public.URL + "/healthz", "GET, HEAD"},
		{http.MethodDelete, p.public.URL + "/events", "GET, HEAD, POST"},
		{"PURGE", p.public.URL + "/readyz", "GET, HEAD"},
		{http.MethodGet, p.admin.URL + "/admin/drain", "POST"},
		{http.MethodPost, p.admin.URL + "/admin/stats", "GET, HEAD"},
	}
	for _, tc := range cases {
		res := do(t, tc.method, tc.url, "")
		assertError(t, res, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := res.header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.url, got, tc.allow)
		}
	}
	// The pages answer their own 405s, with an unknown method too.
	for _, method := range []string{http.MethodDelete, "PURGE"} {
		if res := do(t, method, p.public.URL+"/", ""); res.status != http.StatusMethodNotAllowed || res.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: %d, Allow %q", method, res.status, res.header.Get("Allow"))
		}
	}
}

// TestUnauthorizedChallenge: a 401 tells the client which scheme to use.
func TestUnauthorizedChallenge(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PublishToken: "s3cret"}})
	ct := []string{"Content-Type", "application/json"}
	for _, url := range []string{p.public.URL + "/rooms/r/events", p.public.URL + "/events"} {
		res := do(t, http.MethodPost, url, `1`, append(ct, "Authorization", "Bearer wrong")...)
		assertError(t, res, http.StatusUnauthorized, "unauthorized")
		if got := res.header.Get("WWW-Authenticate"); got != `Bearer realm="roomcast"` {
			t.Errorf("POST %s: WWW-Authenticate %q", url, got)
		}
	}
}
