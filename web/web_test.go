package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRoutes(t *testing.T) {
	tests := []struct {
		name    string
		h       http.Handler
		path    string
		ctype   string
		cache   string
		page    bool
		content string // a substring of the body
	}{
		{"demo page", Public(), "/", "text/html; charset=utf-8", "no-cache", true, "<title>roomcast"},
		{"module", Public(), "/roomcast.js", "text/javascript; charset=utf-8", "public, max-age=300", false, "export function subscribe"},
		{"types", Public(), "/roomcast.d.ts", "application/typescript; charset=utf-8", "public, max-age=300", false, "export declare function subscribe"},
		{"demo script", Public(), "/assets/demo.js", "text/javascript; charset=utf-8", "public, max-age=300", false, "from '../roomcast.js'"},
		{"demo style", Public(), "/assets/demo.css", "text/css; charset=utf-8", "public, max-age=300", false, ".log"},
		{"shared style", Public(), "/assets/style.css", "text/css; charset=utf-8", "public, max-age=300", false, ":root"},
		{"icon", Public(), "/assets/icon.svg", "image/svg+xml", "public, max-age=300", false, "<svg"},
		{"operator page", Admin(), "/", "text/html; charset=utf-8", "no-cache", true, "Drain this pod"},
		{"operator script", Admin(), "/assets/admin.js", "text/javascript; charset=utf-8", "public, max-age=300", false, "admin/stats"},
		{"operator style", Admin(), "/assets/style.css", "text/css; charset=utf-8", "public, max-age=300", false, ":root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := get(t, tt.h, http.MethodGet, tt.path, nil)
			b := body(t, res)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, body %s", res.StatusCode, b)
			}
			for k, want := range map[string]string{
				"Content-Type":           tt.ctype,
				"Cache-Control":          tt.cache,
				"X-Content-Type-Options": "nosniff",
			} {
				if got := res.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(res.Header.Get("ETag")) {
				t.Errorf("ETag = %q, want a quoted hash", res.Header.Get("ETag"))
			}
			csp := res.Header.Get("Content-Security-Policy")
			if tt.page && !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("page CSP = %q", csp)
			}
			if !tt.page && csp != "" {
				t.Errorf("asset has a CSP: %q", csp)
			}
			if !strings.Contains(b, tt.content) {
				t.Errorf("body does not contain %q", tt.content)
			}
		})
	}
}

func TestConditionalGet(t *testing.T) {
	first := get(t, Public(), http.MethodGet, "/roomcast.js", nil)
	etag := first.Header.Get("ETag")
	res := get(t, Public(), http.MethodGet, "/roomcast.js", http.Header{"If-None-Match": {etag}})
	if res.StatusCode != http.StatusNotModified {
		t.Fatalf("status %d with If-None-Match %s, want 304", res.StatusCode, etag)
	}
	if b := body(t, res); b != "" {
		t.Errorf("304 with a body: %q", b)
	}
	res = get(t, Public(), http.MethodGet, "/roomcast.js", http.Header{"If-None-Match": {`"stale"`}})
	if res.StatusCode != http.StatusOK {
		t.Errorf("status %d with a stale ETag, want 200", res.StatusCode)
	}
	if other := get(t, Public(), http.MethodGet, "/", nil).Header.Get("ETag"); other == etag {
		t.Errorf("two files share the ETag %s", etag)
	}
}

func TestHead(t *testing.T) {
	res := get(t, Public(), http.MethodHead, "/roomcast.js", nil)
	if res.StatusCode != http.StatusOK || res.ContentLength <= 0 {
		t.Fatalf("HEAD: status %d, length %d", res.StatusCode, res.ContentLength)
	}
	if b := body(t, res); b != "" {
		t.Errorf("HEAD with a body of %d bytes", len(b))
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		h      http.Handler
		method string
		path   string
		status int
		code   string
	}{
		{"unknown path", Public(), http.MethodGet, "/nope", http.StatusNotFound, "not_found"},
		{"unknown asset", Public(), http.MethodGet, "/assets/nope.js", http.StatusNotFound, "not_found"},
		{"page under assets", Public(), http.MethodGet, "/assets/index.html", http.StatusNotFound, "not_found"},
		{"index by name", Public(), http.MethodGet, "/index.html", http.StatusNotFound, "not_found"},
		{"directory traversal", Public(), http.MethodGet, "/assets/../web.go", http.StatusNotFound, "not_found"},
		{"operator asset on public", Public(), http.MethodGet, "/assets/admin.js", http.StatusNotFound, "not_found"},
		{"module on admin", Admin(), http.MethodGet, "/roomcast.js", http.StatusNotFound, "not_found"},
		{"demo asset on admin", Admin(), http.MethodGet, "/assets/demo.js", http.StatusNotFound, "not_found"},
		{"post to page", Public(), http.MethodPost, "/", http.StatusMethodNotAllowed, "method_not_allowed"},
		{"delete module", Public(), http.MethodDelete, "/roomcast.js", http.StatusMethodNotAllowed, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := get(t, tt.h, tt.method, tt.path, nil)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			var e struct{ Error, Message string }
			if err := json.Unmarshal([]byte(body(t, res)), &e); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if e.Error != tt.code || e.Message == "" {
				t.Errorf("error body %+v, want code %q and a message", e, tt.code)
			}
			if tt.status == http.StatusMethodNotAllowed && res.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow = %q", res.Header.Get("Allow"))
			}
		})
	}
}

// TestPagesAreSelfContained checks that every script, style sheet, icon and
// module import of the pages resolves on the same handler, and that nothing
// is loaded from another origin (the machine may have no internet).
func TestPagesAreSelfContained(t *testing.T) {
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"|from '([^']+)'|import\('([^']+)'\)`)
	external := regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for name, h := range map[string]http.Handler{"public": Public(), "admin": Admin()} {
		t.Run(name, func(t *testing.T) {
			seen := map[string]bool{}
			queue := []string{"/"}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				if seen[p] {
					continue
				}
				seen[p] = true
				res := get(t, h, http.MethodGet, p, nil)
				b := body(t, res)
				if res.StatusCode != http.StatusOK {
					t.Errorf("%s: status %d", p, res.StatusCode)
					continue
				}
				if m := external.FindString(b); m != "" && !strings.Contains(m, "www.w3.org") {
					t.Errorf("%s refers to another origin: %s", p, m)
				}
				for _, m := range refs.FindAllStringSubmatch(b, -1) {
					ref := m[1] + m[2] + m[3]
					if isGatewayRoute(ref) || strings.Contains(ref, "${") {
						continue // a gateway route, or text inside a template string
					}
					queue = append(queue, resolve(p, ref))
				}
			}
			if len(seen) < 4 {
				t.Errorf("only %d files reached from /: %v", len(seen), seen)
			}
		})
	}
}

// isGatewayRoute reports whether a page link points at a gateway route
// rather than at a file of this package.
func isGatewayRoute(ref string) bool {
	for _, p := range []string{"healthz", "readyz", "admin/stats", "metrics", "debug/pprof/"} {
		if ref == p {
			return true
		}
	}
	return false
}

// resolve resolves a relative reference against the path of the file that
// contains it.
func resolve(base, ref string) string {
	if strings.HasPrefix(ref, "/") {
		return ref
	}
	dir := base[:strings.LastIndex(base, "/")+1]
	for strings.HasPrefix(ref, "../") {
		ref = ref[3:]
		dir = dir[:strings.LastIndex(strings.TrimSuffix(dir, "/"), "/")+1]
	}
	return dir + strings.TrimPrefix(ref, "./")
}
