package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMetricsAddrFlag(t *testing.T) {
	c, err := parseConfig(nil, noEnvironment, io.Discard)
	if err != nil || c.MetricsAddr != "" {
		t.Fatalf("default --metrics-addr %q, %v; want empty", c.MetricsAddr, err)
	}
	for name, args := range map[string][]string{
		"no host":           {"--metrics-addr", ":9100"},
		"no port":           {"--metrics-addr", "127.0.0.1"},
		"same as admin":     {"--metrics-addr", "127.0.0.1:9090"},
		"same as public":    {"--metrics-addr", "127.0.0.1:8080"},
		"port out of range": {"--metrics-addr", "127.0.0.1:70000"},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkConfig(args, noEnvironment)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "--metrics-addr") {
				t.Fatalf("message does not name --metrics-addr: %v", err)
			}
		})
	}
	if err := checkConfig([]string{"--metrics-addr", "0.0.0.0:9100"}, noEnvironment); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsAddrServesMetricsAlone: with --metrics-addr, /metrics moves to its own
// listener and the admin listener keeps the rest.
func TestMetricsAddrServesMetricsAlone(t *testing.T) {
	p := startForLine(t, "--metrics-addr", "127.0.0.1:0", "--drain-delay", "0s", "--drain-window", "100ms", "--drain-timeout", "5s")
	addr, _ := startLine(t, p)["metrics_addr"].(string)
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("start-up line metrics_addr %q", addr)
	}
	get := func(url string) (int, string) {
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("http://" + addr + "/metrics"); code != http.StatusOK || !strings.Contains(body, "roomcast_") {
		t.Fatalf("GET /metrics on --metrics-addr: %d %.200s", code, body)
	}
	if code, _ := get("http://" + addr + "/admin/stats"); code != http.StatusNotFound {
		t.Fatalf("GET /admin/stats on --metrics-addr: %d, want 404", code)
	}
	if code, _ := get(p.Admin + "/metrics"); code != http.StatusNotFound {
		t.Fatalf("GET /metrics on the admin listener: %d, want 404", code)
	}
	if code, _ := get(p.Admin + "/admin/stats"); code != http.StatusOK {
		t.Fatalf("GET /admin/stats on the admin listener: %d", code)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := wait(t, p.Process, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
}

func TestMetricsAddrListenFailureExitsTwo(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	code, stderr := runGateway(t, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--metrics-addr", busy.Addr().String())
	if code != 2 || !strings.Contains(stderr, "--metrics-addr") {
		t.Fatalf("exit code %d, want 2 and a message naming --metrics-addr; stderr:\n%s", code, stderr)
	}
}
