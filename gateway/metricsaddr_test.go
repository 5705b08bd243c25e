package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// TestMetricsApart: with MetricsApart, /metrics is served by Metrics alone, which
// serves nothing else, and the admin listener no longer serves it.
func TestMetricsApart(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MetricsApart: true, AdminToken: "adm"}})
	m := httptest.NewServer(p.srv.Metrics())
	t.Cleanup(m.Close)
	res := do(t, http.MethodGet, m.URL+"/metrics", "")
	if res.status != http.StatusOK || !strings.Contains(res.body, "roomcast_admin_unauthorized_total") {
		t.Fatalf("GET /metrics on the metrics listener: %d %.200s", res.status, res.body)
	}
	for _, path := range []string{"/", "/admin/stats", "/debug/pprof/", "/rooms/r/events", "/healthz"} {
		assertError(t, do(t, http.MethodGet, m.URL+path, "", "Authorization", "Bearer adm"), http.StatusNotFound, "not_found")
	}
	assertError(t, do(t, http.MethodPost, m.URL+"/metrics", "", "Origin", "https://evil.example"), http.StatusForbidden, "cross_origin")
	if res := do(t, http.MethodGet, p.admin.URL+"/metrics", ""); res.status != http.StatusNotFound {
		t.Fatalf("GET /metrics on the admin listener: %d, want 404", res.status)
	}
	if res := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "", "Authorization", "Bearer adm"); res.status != http.StatusOK {
		t.Fatalf("GET /admin/stats on the admin listener: %d", res.status)
	}
}
