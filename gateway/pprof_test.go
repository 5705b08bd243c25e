package gateway_test

import (
	"net/http"
	"os"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// TestPprofCmdline: /debug/pprof/cmdline shows Config.Cmdline, whose secrets the
// caller replaced, never os.Args itself; without one, the program's name alone.
func TestPprofCmdline(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{Cmdline: []string{"gw", "--publish-token", "xxxxx"}}})
	if res := do(t, http.MethodGet, p.admin.URL+"/debug/pprof/cmdline", ""); res.status != 200 || res.body != "gw\x00--publish-token\x00xxxxx" {
		t.Fatalf("cmdline: %d %q", res.status, res.body)
	}
	p = newPod(t, podConfig{})
	if res := do(t, http.MethodGet, p.admin.URL+"/debug/pprof/cmdline", ""); res.status != 200 || res.body != os.Args[0] {
		t.Fatalf("cmdline without Config.Cmdline: %d %q, want %q alone", res.status, res.body, os.Args[0])
	}
}
