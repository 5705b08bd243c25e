package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

const (
	listedOrigin   = "https://app.example.com"
	unlistedOrigin = "https://evil.example"
)

// corsRoutes are the routes pages call across origins. POST /tickets is covered by
// path, whether or not its handler is mounted.
var corsRoutes = []struct {
	method, path, contentType, body string
}{
	{http.MethodGet, "/rooms/r/events", "", ""},
	{http.MethodHead, "/rooms/r/events", "", ""},
	{http.MethodPost, "/rooms/r/events", "text/plain", "hi"},
	{http.MethodPost, "/events", "application/json", `[{"room":"r","body":1}]`},
	{http.MethodPost, "/tickets", "application/json", `{}`},
}

// send sends one request and returns its status and headers without reading the
// body (a stream's never ends); headers come as name, value pairs.
func send(t *testing.T, method, url, contentType, body string, headers ...string) response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return response{status: res.StatusCode, header: res.Header}
}

// corsHeaders are the answer's Access-Control-* headers, joined per name.
func corsHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = strings.Join(v, ", ")
		}
	}
	return out
}

// varies reports whether the answer's Vary lists name.
func varies(h http.Header, name string) bool {
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), name) {
				return true
			}
		}
	}
	return false
}

func TestCORS(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{AllowOrigins: []string{listedOrigin, "http://localhost:5173"}}})
	for _, rt := range corsRoutes {
		for _, origin := range []string{listedOrigin, unlistedOrigin, ""} {
			for _, preflight := range []bool{false, true} {
				name := rt.method + " " + rt.path + "/origin=" + origin + "/preflight=" + map[bool]string{false: "no", true: "yes"}[preflight]
				t.Run(name, func(t *testing.T) {
					var res response
					if preflight {
						h := []string{"Access-Control-Request-Method", rt.method, "Access-Control-Request-Headers", "authorization,content-type,last-event-id"}
						if origin != "" {
							h = append(h, "Origin", origin)
						}
						res = send(t, http.MethodOptions, p.public.URL+rt.path, "", "", h...)
					} else {
						var h []string
						if origin != "" {
							h = []string{"Origin", origin, "Sec-Fetch-Site", "cross-site"}
						}
						res = send(t, rt.method, p.public.URL+rt.path, rt.contentType, rt.body, h...)
					}
					if !varies(res.header, "Origin") {
						t.Errorf("Vary %q: no Origin", res.header.Values("Vary"))
					}
					got := corsHeaders(res.header)
					var want map[string]string
					switch {
					case origin == listedOrigin && preflight:
						want = map[string]string{
							"Access-Control-Allow-Origin":      listedOrigin,
							"Access-Control-Allow-Credentials": "true",
							"Access-Control-Allow-Methods":     rt.method,
							"Access-Control-Allow-Headers":     "Authorization, Content-Type, Last-Event-Id",
							"Access-Control-Max-Age":           "600",
						}
					case origin == listedOrigin:
						want = map[string]string{
							"Access-Control-Allow-Origin":      listedOrigin,
							"Access-Control-Allow-Credentials": "true",
							"Access-Control-Expose-Headers":    "Retry-After",
						}
					default:
						want = map[string]string{}
					}
					if !mapsEqual(got, want) {
						t.Errorf("Access-Control-* headers\n got %v\nwant %v", got, want)
					}
					switch {
					case preflight && origin != "":
						if res.status != http.StatusNoContent {
							t.Errorf("preflight answered %d, want 204", res.status)
						}
					case rt.method == http.MethodPost && origin == unlistedOrigin:
						if res.status != http.StatusForbidden {
							t.Errorf("cross-site POST from an unlisted origin answered %d, want 403", res.status)
						}
					case rt.path != "/tickets" && !preflight:
						if res.status >= 300 {
							t.Errorf("answered %d", res.status)
						}
					}
				})
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCORSPreflightRefusals: a preflight for a method or a header the routes do not
// take gets no grant, even from a listed origin.
func TestCORSPreflightRefusals(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{AllowOrigins: []string{listedOrigin}}})
	for _, h := range [][]string{
		{"Access-Control-Request-Method", "DELETE"},
		{"Access-Control-Request-Method", "PUT"},
		{"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "x-forwarded-for"},
	} {
		res := send(t, http.MethodOptions, p.public.URL+"/rooms/r/events", "", "", append([]string{"Origin", listedOrigin}, h...)...)
		if got := corsHeaders(res.header); len(got) != 0 || !varies(res.header, "Origin") {
			t.Errorf("preflight %v: %d, Access-Control-* %v, Vary %q", h, res.status, got, res.header.Values("Vary"))
		}
	}
}

// TestCORSPublishOptions: a page on an allowed origin may send every publish
// option: its type, idempotency key, time to live and receipt wait.
func TestCORSPublishOptions(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{AllowOrigins: []string{listedOrigin}}})
	res := send(t, http.MethodOptions, p.public.URL+"/rooms/r/events", "", "", "Origin", listedOrigin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "event-type,idempotency-key,event-ttl,wait-for")
	if got, want := res.header.Get("Access-Control-Allow-Headers"), "Event-Type, Idempotency-Key, Event-Ttl, Wait-For"; res.status != http.StatusNoContent || got != want {
		t.Fatalf("preflight: %d, Access-Control-Allow-Headers %q, want %q", res.status, got, want)
	}
}

// TestCORSOtherRoutes: the web pages, health and unknown routes get no CORS headers,
// and with no allowed origins nothing does.
func TestCORSOtherRoutes(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{AllowOrigins: []string{listedOrigin}}})
	for _, path := range []string{"/", "/healthz", "/readyz", "/rooms/r", "/rooms/a/b/events", "/events/x", "/ticketsx"} {
		res := send(t, http.MethodGet, p.public.URL+path, "", "", "Origin", listedOrigin)
		if got := corsHeaders(res.header); len(got) != 0 {
			t.Errorf("GET %s: Access-Control-* %v", path, got)
		}
	}
	res := send(t, http.MethodGet, p.admin.URL+"/admin/stats", "", "", "Origin", listedOrigin)
	if got := corsHeaders(res.header); len(got) != 0 || varies(res.header, "Origin") {
		t.Errorf("admin: Access-Control-* %v, Vary %q", got, res.header.Values("Vary"))
	}
	plain := newPod(t, podConfig{})
	for _, rt := range corsRoutes {
		res := send(t, http.MethodOptions, plain.public.URL+rt.path, "", "", "Origin", listedOrigin, "Access-Control-Request-Method", rt.method)
		if got := corsHeaders(res.header); len(got) != 0 || varies(res.header, "Origin") || res.status == http.StatusNoContent {
			t.Errorf("no allowed origins, preflight %s %s: %d, Access-Control-* %v, Vary %q", rt.method, rt.path, res.status, got, res.header.Values("Vary"))
		}
	}
}

// TestCORSWildcard: "*" allows every origin, never with credentials, and trusts no
// origin for state-changing requests: those still need a bearer credential.
func TestCORSWildcard(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{AllowOrigins: []string{"*"}, PublishToken: "s3cret"}})
	res := send(t, http.MethodOptions, p.public.URL+"/rooms/r/events", "", "", "Origin", unlistedOrigin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization")
	want := map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "POST",
		"Access-Control-Allow-Headers": "Authorization",
		"Access-Control-Max-Age":       "600",
	}
	if got := corsHeaders(res.header); res.status != http.StatusNoContent || !mapsEqual(got, want) {
		t.Errorf("preflight: %d %v, want 204 %v", res.status, got, want)
	}
	res = send(t, http.MethodGet, p.public.URL+"/rooms/r/events", "", "", "Origin", unlistedOrigin, "Sec-Fetch-Site", "cross-site")
	want = map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "Retry-After"}
	if got := corsHeaders(res.header); res.status != http.StatusOK || !mapsEqual(got, want) || !varies(res.header, "Origin") {
		t.Errorf("stream: %d %v, want 200 %v", res.status, got, want)
	}
	assertError(t, do(t, http.MethodPost, p.public.URL+"/rooms/r/events", "hi", "Content-Type", "text/plain",
		"Origin", unlistedOrigin, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden, "cross_origin")
	res = send(t, http.MethodPost, p.public.URL+"/rooms/r/events", "text/plain", "hi",
		"Origin", unlistedOrigin, "Sec-Fetch-Site", "cross-site", "Authorization", "Bearer s3cret")
	if res.status != http.StatusCreated || res.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("cross-site POST with a bearer token: %d %v", res.status, corsHeaders(res.header))
	}
}

// TestCrossOriginTrustsAllowedOrigins: a state-changing request from a listed origin
// passes the cross-origin protection on the public listener (old browsers send only
// Origin, new ones Sec-Fetch-Site as well); one from any other origin is still 403
// cross_origin, and the admin listener trusts no origin.
func TestCrossOriginTrustsAllowedOrigins(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{AllowOrigins: []string{listedOrigin}}})
	s := p.subscribe(t, "r", "")
	s.nextAny()
	cases := []struct {
		name    string
		origin  string
		site    string
		status  int
		refused bool
	}{
		{"listed, cross-site", listedOrigin, "cross-site", http.StatusCreated, false},
		{"listed, same-site", listedOrigin, "same-site", http.StatusCreated, false},
		{"listed, no Sec-Fetch-Site", listedOrigin, "", http.StatusCreated, false},
		{"listed in other case", "HTTPS://APP.EXAMPLE.COM", "cross-site", http.StatusForbidden, true},
		{"unlisted, cross-site", unlistedOrigin, "cross-site", http.StatusForbidden, true},
		{"unlisted, no Sec-Fetch-Site", unlistedOrigin, "", http.StatusForbidden, true},
		{"listed host, other scheme", "http://app.example.com", "cross-site", http.StatusForbidden, true},
		{"listed host, other port", "https://app.example.com:8443", "cross-site", http.StatusForbidden, true},
		{"null", "null", "cross-site", http.StatusForbidden, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := []string{"Content-Type", "text/plain", "Origin", tc.origin}
			if tc.site != "" {
				h = append(h, "Sec-Fetch-Site", tc.site)
			}
			res := do(t, http.MethodPost, p.public.URL+"/rooms/r/events", tc.name, h...)
			if tc.refused {
				assertError(t, res, tc.status, "cross_origin")
				return
			}
			if res.status != tc.status {
				t.Fatalf("%d %s", res.status, res.body)
			}
			if f := s.next(); !strings.Contains(f.data, tc.name) {
				t.Fatalf("the stream got %q, want the event just published", f.data)
			}
		})
	}
	// The marker is the next event the stream sees: nothing refused above got through.
	p.publish(t, "r", `"marker"`)
	if f := s.next(); !strings.Contains(f.data, `"body":"marker"`) {
		t.Fatalf("after the refusals the stream got %q, want the marker", f.data)
	}
	assertError(t, do(t, http.MethodPost, p.admin.URL+"/admin/shed?count=0", "", "Origin", listedOrigin, "Sec-Fetch-Site", "cross-site"),
		http.StatusForbidden, "cross_origin")
	if !slices.Contains([]int{http.StatusOK}, do(t, http.MethodGet, p.admin.URL+"/admin/stats", "").status) {
		t.Fatal("admin stats unreachable")
	}
}

func TestCheckOrigins(t *testing.T) {
	good := []struct {
		in   []string
		want []string
	}{
		{[]string{"https://app.example.com"}, []string{"https://app.example.com"}},
		{[]string{"HTTPS://App.Example.COM"}, []string{"https://app.example.com"}},
		{[]string{"http://localhost:5173", "https://a.example"}, []string{"http://localhost:5173", "https://a.example"}},
		{[]string{"http://[::1]:8080"}, []string{"http://[::1]:8080"}},
		{[]string{"http://127.0.0.1:65535"}, []string{"http://127.0.0.1:65535"}},
		{[]string{"*"}, []string{"*"}},
	}
	for _, tc := range good {
		got, err := gateway.CheckOrigins(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("CheckOrigins(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	bad := map[string][]string{
		"no scheme":          {"app.example.com"},
		"scheme only":        {"https://"},
		"ftp":                {"ftp://app.example.com"},
		"javascript":         {"javascript:alert(1)"},
		"path":               {"https://app.example.com/app"},
		"trailing slash":     {"https://app.example.com/"},
		"query":              {"https://app.example.com?x=1"},
		"empty query":        {"https://app.example.com?"},
		"fragment":           {"https://app.example.com#top"},
		"empty fragment":     {"https://app.example.com#"},
		"user":               {"https://u:p@app.example.com"},
		"wildcard host":      {"https://*.example.com"},
		"port 0":             {"https://app.example.com:0"},
		"port too big":       {"https://app.example.com:65536"},
		"port not a number":  {"https://app.example.com:http"},
		"empty port":         {"https://app.example.com:"},
		"default https port": {"https://app.example.com:443"},
		"default http port":  {"http://app.example.com:80"},
		"star and another":   {"*", "https://app.example.com"},
		"another and star":   {"https://app.example.com", "*"},
		"empty":              {""},
		"null":               {"null"},
		"space":              {"https://app.example.com "},
	}
	for name, in := range bad {
		if got, err := gateway.CheckOrigins(in); err == nil {
			t.Errorf("%s: CheckOrigins(%q) accepted: %q", name, in, got)
		}
	}
}

// FuzzCheckOrigins: whatever CheckOrigins accepts, the cross-origin protection takes
// as a trusted origin, and normalizing is idempotent.
func FuzzCheckOrigins(f *testing.F) {
	for _, s := range []string{"https://app.example.com", "http://[::1]:8080", "*", "https://a.example:443", "http://a/b", "HTTP://A.B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := gateway.CheckOrigins([]string{s})
		if err != nil {
			return
		}
		if len(got) != 1 {
			t.Fatalf("CheckOrigins(%q) = %q", s, got)
		}
		if got[0] == "*" {
			return
		}
		if err := http.NewCrossOriginProtection().AddTrustedOrigin(got[0]); err != nil {
			t.Fatalf("CheckOrigins(%q) = %q, which AddTrustedOrigin refuses: %v", s, got[0], err)
		}
		again, err := gateway.CheckOrigins(got)
		if err != nil || again[0] != got[0] {
			t.Fatalf("CheckOrigins(%q) = %q, then %q, %v", s, got[0], again, err)
		}
	})
}
