package gateway_test

import (
	"net/http"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// TestAdminToken: with an admin token, /admin/* and /debug/pprof/* need it as a
// bearer credential; /metrics and the operator page's files stay open.
func TestAdminToken(t *testing.T) {
	const token = "adm-s3cret"
	p := newPod(t, podConfig{gw: gateway.Config{AdminToken: token}})
	guarded := []struct{ method, path string }{
		{http.MethodGet, "/admin/stats"},
		{http.MethodPost, "/admin/shed?count=0"},
		{http.MethodPost, "/admin/drain"},
		{http.MethodPost, "/admin/revoke"},
		{http.MethodGet, "/admin/nope"},
		{http.MethodGet, "/admin"},
		{http.MethodGet, "/debug/pprof/"},
		{http.MethodGet, "/debug/pprof/cmdline"},
		{http.MethodGet, "/debug/pprof/heap?debug=1"},
		{http.MethodGet, "/debug/pprof/%2e%2e/admin/stats"},
	}
	credentials := []struct {
		name string
		auth string
	}{
		{"none", ""},
		{"wrong", "Bearer adm-s3cre"},
		{"longer", "Bearer adm-s3cret2"},
		{"empty bearer", "Bearer "},
		{"basic", "Basic YWRtOmFkbS1zM2NyZXQ="},
		{"token without scheme", token},
		{"publish token scheme", "Token " + token},
	}
	refused := 0
	for _, g := range guarded {
		for _, c := range credentials {
			t.Run(g.method+" "+g.path+"/"+c.name, func(t *testing.T) {
				var h []string
				if c.auth != "" {
					h = []string{"Authorization", c.auth}
				}
				res := do(t, g.method, p.admin.URL+g.path, "", h...)
				assertError(t, res, http.StatusUnauthorized, "unauthorized")
				if res.header.Get("WWW-Authenticate") == "" {
					t.Error("no WWW-Authenticate")
				}
				refused++
			})
		}
	}
	if !p.drain.Ready() {
		t.Fatal("a refused drain drained the pod")
	}
	open := []struct {
		path   string
		status int
	}{
		{"/metrics", http.StatusOK},
		{"/", http.StatusOK},
		{"/assets/admin.js", http.StatusOK},
		{"/assets/admin.css", http.StatusOK},
		{"/administrator", http.StatusNotFound},
	}
	for _, o := range open {
		if res := do(t, http.MethodGet, p.admin.URL+o.path, ""); res.status != o.status {
			t.Errorf("GET %s without a token: %d, want %d", o.path, res.status, o.status)
		}
	}
	if got := p.metrics(t).Value("roomcast_admin_unauthorized_total"); got != float64(refused) {
		t.Errorf("roomcast_admin_unauthorized_total %v, want %d", got, refused)
	}
	authorized := []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/admin/stats", http.StatusOK},
		{http.MethodPost, "/admin/shed?count=0", http.StatusOK},
		{http.MethodGet, "/admin/nope", http.StatusNotFound},
		{http.MethodGet, "/debug/pprof/", http.StatusOK},
		{http.MethodGet, "/debug/pprof/cmdline", http.StatusOK},
		{http.MethodPost, "/admin/drain", http.StatusAccepted},
	}
	for _, a := range authorized {
		for _, auth := range []string{"Bearer " + token, "bearer  " + token + " "} {
			if res := do(t, a.method, p.admin.URL+a.path, "", "Authorization", auth); res.status != a.status {
				t.Errorf("%s %s with %q: %d %s, want %d", a.method, a.path, auth, res.status, res.body, a.status)
			}
		}
	}
	if p.drain.Ready() {
		t.Fatal("an authorized drain did not drain the pod")
	}
	// The public listener never asks for the admin token.
	if res := do(t, http.MethodGet, p.public.URL+"/healthz", ""); res.status != http.StatusOK {
		t.Fatalf("public /healthz: %d", res.status)
	}
}

// TestAdminOpenWithoutToken: with no admin token the admin routes answer as before.
func TestAdminOpenWithoutToken(t *testing.T) {
	p := newPod(t, podConfig{})
	for _, path := range []string{"/admin/stats", "/debug/pprof/", "/metrics"} {
		if res := do(t, http.MethodGet, p.admin.URL+path, ""); res.status != http.StatusOK {
			t.Errorf("GET %s: %d", path, res.status)
		}
	}
}
