package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

func TestAllowOriginFlag(t *testing.T) {
	good := []struct {
		value string
		want  []string
	}{
		{"", nil},
		{"https://app.example.com", []string{"https://app.example.com"}},
		{"https://app.example.com, http://localhost:5173", []string{"https://app.example.com", "http://localhost:5173"}},
		{"HTTPS://App.Example.com", []string{"https://app.example.com"}},
		{"*", []string{"*"}},
	}
	for _, tc := range good {
		c, err := parseConfig([]string{"--allow-origin", tc.value}, noEnvironment, io.Discard)
		if err != nil || !slices.Equal(c.allowOrigins(), tc.want) {
			t.Errorf("--allow-origin %q: %q, %v; want %q", tc.value, c.allowOrigins(), err, tc.want)
		}
	}
	c, err := parseConfig(nil, func(k string) string {
		if k == "ROOMCAST_ALLOW_ORIGIN" {
			return "https://env.example"
		}
		return ""
	}, io.Discard)
	if err != nil || !slices.Equal(c.allowOrigins(), []string{"https://env.example"}) {
		t.Errorf("ROOMCAST_ALLOW_ORIGIN: %q, %v", c.allowOrigins(), err)
	}
	bad := map[string]string{
		"no scheme":        "app.example.com",
		"path":             "https://app.example.com/app",
		"trailing slash":   "https://app.example.com/",
		"ftp":              "ftp://app.example.com",
		"star and another": "*,https://app.example.com",
		"another and star": "https://app.example.com,*",
		"wildcard host":    "https://*.example.com",
		"default port":     "https://app.example.com:443",
		"empty entry":      "https://app.example.com,,https://b.example",
		"only commas":      ",",
		"query":            "https://app.example.com?a=1",
	}
	for name, v := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig([]string{"--allow-origin", v}, noEnvironment, io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "--allow-origin") {
				t.Fatalf("message does not name --allow-origin: %v", err)
			}
		})
	}
	_, err = parseConfig(nil, func(k string) string {
		if k == "ROOMCAST_ALLOW_ORIGIN" {
			return "https://env.example/"
		}
		return ""
	}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ROOMCAST_ALLOW_ORIGIN") {
		t.Errorf("a bad ROOMCAST_ALLOW_ORIGIN: %v, want a message naming it", err)
	}
}

func TestAdminTokenFileFlag(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, "good", "  secret-admin-1\n")
	c, err := parseConfig([]string{"--admin-token-file", good}, noEnvironment, io.Discard)
	if err != nil || c.AdminToken != "secret-admin-1" {
		t.Fatalf("token %q, err %v", c.AdminToken, err)
	}
	for name, path := range map[string]string{
		"missing file": filepath.Join(dir, "missing"),
		"empty file":   writeFile(t, "empty", ""),
		"blank file":   writeFile(t, "blank", " \n\t\n"),
		"two lines":    writeFile(t, "two", "secret-a\nsecret-b\n"),
		"a directory":  dir,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig([]string{"--admin-token-file", path}, noEnvironment, io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "--admin-token-file") {
				t.Fatalf("message does not name --admin-token-file: %v", err)
			}
			if strings.Contains(err.Error(), "secret-") {
				t.Fatalf("message shows a token: %v", err)
			}
		})
	}
}

// TestMaxStreamsPerIPDefault: without a proxy a client address is capped by default.
func TestMaxStreamsPerIPDefault(t *testing.T) {
	c, err := parseConfig(nil, noEnvironment, io.Discard)
	if err != nil || c.MaxStreamsPerIP != 100 {
		t.Fatalf("--max-streams-per-ip default %d, %v; want 100", c.MaxStreamsPerIP, err)
	}
	c, err = parseConfig([]string{"--max-streams-per-ip", "0"}, noEnvironment, io.Discard)
	if err != nil || c.MaxStreamsPerIP != 0 {
		t.Fatalf("--max-streams-per-ip 0: %d, %v", c.MaxStreamsPerIP, err)
	}
}

// TestAdminTokenFileGuardsTheAdminListener: the running gateway asks for the file's
// token on /admin/ and pprof, never on /metrics, never prints it, and still drains
// on SIGTERM.
func TestAdminTokenFileGuardsTheAdminListener(t *testing.T) {
	const token = "adm-token-7c1e"
	path := writeFile(t, "admin-token", token+"\n")
	p := startForLine(t, "--admin-token-file", path, "--drain-delay", "0s", "--drain-window", "100ms", "--drain-timeout", "5s")
	get := func(url, auth string) int {
		if auth == "" {
			return getStatus(t, url)
		}
		return getStatus(t, url, "Authorization", auth)
	}
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/admin/stats", "", http.StatusUnauthorized},
		{"/admin/stats", "Bearer nope", http.StatusUnauthorized},
		{"/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{"/admin/stats", "Bearer " + token, http.StatusOK},
		{"/debug/pprof/cmdline", "Bearer " + token, http.StatusOK},
		{"/metrics", "", http.StatusOK},
		{"/", "", http.StatusOK},
	} {
		if got := get(p.Admin+tc.path, tc.auth); got != tc.want {
			t.Errorf("GET %s (%q): %d, want %d", tc.path, tc.auth, got, tc.want)
		}
	}
	line := startLine(t, p)
	if line["admin_token_set"] != true || line["admin_token_file"] != path {
		t.Errorf("start-up line: admin_token_set %v, admin_token_file %v", line["admin_token_set"], line["admin_token_file"])
	}
	if bytes.Contains(p.startLine, []byte(token)) {
		t.Fatalf("the start-up line shows the admin token: %s", p.startLine)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := wait(t, p.Process, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if strings.Contains(p.Log(), token) {
		t.Fatal("the log shows the admin token")
	}
}

// TestAllowOriginIsWired: the running gateway answers a preflight from an allowed
// origin and lets its publish through the cross-origin check.
func TestAllowOriginIsWired(t *testing.T) {
	const origin = "https://app.example.com"
	p := startForLine(t, "--allow-origin", origin)
	req, _ := http.NewRequest(http.MethodOptions, p.Public+"/rooms/r/events", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != origin ||
		res.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
	req, _ = http.NewRequest(http.MethodPost, p.Public+"/rooms/r/events", strings.NewReader("hi"))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", origin)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("cross-site publish from the allowed origin: %d", res.StatusCode)
	}
	if got, _ := startLine(t, p)["allow_origin"].(string); got != origin {
		t.Fatalf("start-up line allow_origin %q", got)
	}
}

func TestPublicHostFlag(t *testing.T) {
	good := []struct {
		args []string
		env  string
		want string
	}{
		{nil, "", ""},
		{[]string{"--public-host", "Rooms.Example.com"}, "", "rooms.example.com"},
		{[]string{"--public-host", "rooms.example.com", "--public-host", "*.apps.example.com"}, "", "rooms.example.com,*.apps.example.com"},
		{[]string{"--public-host", "rooms.example.com, *.apps.example.com"}, "", "rooms.example.com,*.apps.example.com"},
		{nil, "rooms.example.com,*.apps.example.com", "rooms.example.com,*.apps.example.com"},
		{[]string{"--public-host", "*"}, "", "*"},
	}
	for _, tc := range good {
		c, err := parseConfig(tc.args, func(k string) string {
			if k == "ROOMCAST_PUBLIC_HOST" {
				return tc.env
			}
			return ""
		}, io.Discard)
		if err != nil || c.PublicHosts.String() != tc.want {
			t.Errorf("%q, ROOMCAST_PUBLIC_HOST=%q: %q, %v; want %q", tc.args, tc.env, c.PublicHosts.String(), err, tc.want)
		}
	}
	for name, v := range map[string]string{
		"port":            "rooms.example.com:443",
		"scheme":          "https://rooms.example.com",
		"star and a name": "*,rooms.example.com",
		"inner star":      "a.*.example.com",
		"space":           "rooms example",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig([]string{"--public-host", v}, noEnvironment, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "--public-host") {
				t.Fatalf("%q: %v, want an error naming --public-host", v, err)
			}
		})
	}
}

// TestPublicHostIsWired: the running gateway answers the names of --public-host and
// IP addresses on both listeners, and 421 for any other name.
func TestPublicHostIsWired(t *testing.T) {
	p := startForLine(t, "--public-host", "rooms.example.com")
	for _, tc := range []struct {
		host string
		want int
	}{
		{"rooms.example.com", http.StatusOK},
		{"localhost:8080", http.StatusOK},
		{"10.0.0.12:9090", http.StatusOK},
		{"rebind.evil.example", http.StatusMisdirectedRequest},
	} {
		for _, url := range []string{p.Public + "/healthz", p.Admin + "/admin/stats"} {
			if got := getStatus(t, url, "Host", tc.host); got != tc.want {
				t.Errorf("GET %s with Host %q: %d, want %d", url, tc.host, got, tc.want)
			}
		}
	}
	if got, _ := startLine(t, p)["public_host"].(string); got != "rooms.example.com" {
		t.Fatalf("start-up line public_host %q", got)
	}
}

// getStatus is the status of a GET of url with headers as name, value pairs ("Host"
// sets the Host header).
func getStatus(t *testing.T, url string, headers ...string) int {
	t.Helper()
	req, err := gatewaytest.NewRequest(context.Background(), http.MethodGet, url, nil, headers...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
