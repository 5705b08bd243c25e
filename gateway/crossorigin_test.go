package gateway_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// TestCrossOriginRefused: a page on another origin cannot publish with a simple
// text/plain POST or a form, nor drain or shed the pod: both listeners refuse
// state-changing requests that a browser marks as cross-origin and that carry no
// bearer credential.
func TestCrossOriginRefused(t *testing.T) {
	p := newPod(t, podConfig{})
	s := p.subscribe(t, "r", "")
	s.nextAny()
	foreign := []struct {
		name    string
		headers []string
	}{
		{"sec-fetch-site cross-site", []string{"Sec-Fetch-Site", "cross-site"}},
		{"sec-fetch-site same-site", []string{"Sec-Fetch-Site", "same-site"}},
		{"foreign origin", []string{"Origin", "http://evil.example"}},
		{"foreign origin, basic credential", []string{"Origin", "http://evil.example", "Authorization", "Basic dTpw"}},
	}
	targets := []struct {
		url, contentType, body string
	}{
		{p.public.URL + "/rooms/r/events", "text/plain", "pwned"},
		{p.public.URL + "/rooms/r/events", "application/x-www-form-urlencoded", "a=1"},
		{p.public.URL + "/events", "text/plain", `[{"room":"r","body":1}]`},
		{p.admin.URL + "/admin/drain", "text/plain", ""},
		{p.admin.URL + "/admin/shed?count=10", "text/plain", ""},
	}
	for _, f := range foreign {
		for _, tg := range targets {
			res := do(t, http.MethodPost, tg.url, tg.body, append([]string{"Content-Type", tg.contentType}, f.headers...)...)
			assertError(t, res, http.StatusForbidden, "cross_origin")
		}
	}
	if !p.drain.Ready() || p.rooms.Len() != 1 {
		t.Fatalf("a refused request drained (%v) or shed (%d members) the pod", p.drain.Ready(), p.rooms.Len())
	}
	// Reading stays open to every origin.
	if res := do(t, http.MethodGet, p.public.URL+"/healthz", "", "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"); res.status != 200 {
		t.Fatalf("cross-site GET /healthz: %d", res.status)
	}
	// Same-origin pages and clients that are not browsers publish as before; the
	// marker event is the first the stream sees, so nothing refused above got through.
	host := strings.TrimPrefix(p.public.URL, "http://")
	for i, h := range [][]string{
		{"Sec-Fetch-Site", "same-origin"},
		{"Origin", p.public.URL},
		{"Sec-Fetch-Site", "none"},
		nil,
	} {
		res := do(t, http.MethodPost, p.public.URL+"/rooms/r/events", "fine", append([]string{"Content-Type", "text/plain"}, h...)...)
		if res.status != 201 {
			t.Fatalf("request %d from %s (%v): %d %s", i, host, h, res.status, res.body)
		}
	}
	if f := s.next(); f.seq(t) != 1 || !strings.Contains(f.data, `"body":"fine"`) {
		t.Fatalf("first event %+v", f)
	}
	adminOrigin, _ := url.Parse(p.admin.URL)
	if res := do(t, http.MethodPost, p.admin.URL+"/admin/shed?count=0", "", "Origin", "http://"+adminOrigin.Host); res.status != 200 {
		t.Fatalf("same-origin shed: %d %s", res.status, res.body)
	}
}

// TestCrossOriginWithBearer: a bearer credential is never sent by a browser on its
// own, so a request carrying one is not refused for its origin.
func TestCrossOriginWithBearer(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PublishToken: "s3cret"}})
	for _, url := range []string{p.public.URL + "/rooms/r/events", p.public.URL + "/events"} {
		body := `1`
		if strings.HasSuffix(url, "/events") && !strings.Contains(url, "/rooms/") {
			body = `[{"room":"r","body":1}]`
		}
		res := do(t, http.MethodPost, url, body, "Content-Type", "application/json", "Sec-Fetch-Site", "cross-site",
			"Origin", "http://tool.example", "Authorization", "Bearer s3cret")
		if res.status != 201 && res.status != 200 || strings.Contains(res.body, "error") {
			t.Fatalf("POST %s with a bearer token: %d %s", url, res.status, res.body)
		}
	}
	// A wrong bearer token is refused by the credential check, not the origin check.
	assertError(t, do(t, http.MethodPost, p.public.URL+"/rooms/r/events", `1`, "Content-Type", "application/json",
		"Sec-Fetch-Site", "cross-site", "Authorization", "Bearer wrong"), 401, "unauthorized")
}
