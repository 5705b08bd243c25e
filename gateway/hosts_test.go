package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// TestDNSRebindingRefused: with the defaults (no keys, no admin token), a page whose
// name rebinds to 127.0.0.1 is same-origin to the browser and its requests come
// from loopback; the Host it sends is all that gives it away. Both listeners answer
// it 421 before the loopback trust: it can neither publish nor reach /admin/ or
// pprof. Loopback names and IP addresses are served as before.
func TestDNSRebindingRefused(t *testing.T) {
	p := newPod(t, podConfig{})
	metrics := httptest.NewServer(p.srv.Metrics())
	t.Cleanup(metrics.Close)
	s := p.subscribe(t, "r", "")
	s.nextAny()
	rebound := func(base string) (host, origin string) {
		u, _ := url.Parse(base)
		host = "rebind.evil.example:" + u.Port()
		return host, "http://" + host
	}
	pub, pubOrigin := rebound(p.public.URL)
	adm, admOrigin := rebound(p.admin.URL)
	met, _ := rebound(metrics.URL)
	for _, tc := range []struct {
		name, method, url, body string
		headers                 []string
	}{
		{"publish", http.MethodPost, p.public.URL + "/rooms/r/events", "pwned", []string{"Host", pub, "Origin", pubOrigin, "Content-Type", "text/plain"}},
		{"batch", http.MethodPost, p.public.URL + "/events", `[{"room":"r","body":1}]`, []string{"Host", pub, "Origin", pubOrigin, "Content-Type", "application/json"}},
		{"preflight", http.MethodOptions, p.public.URL + "/rooms/r/events", "", []string{"Host", pub, "Origin", pubOrigin, "Access-Control-Request-Method", "POST"}},
		{"healthz", http.MethodGet, p.public.URL + "/healthz", "", []string{"Host", pub}},
		{"stats", http.MethodGet, p.admin.URL + "/admin/stats", "", []string{"Host", adm}},
		{"revoke", http.MethodPost, p.admin.URL + "/admin/revoke", `{"sub":"ana"}`, []string{"Host", adm, "Origin", admOrigin, "Content-Type", "application/json"}},
		{"drain", http.MethodPost, p.admin.URL + "/admin/drain", "", []string{"Host", adm, "Origin", admOrigin}},
		{"pprof cmdline", http.MethodGet, p.admin.URL + "/debug/pprof/cmdline", "", []string{"Host", adm}},
		{"metrics", http.MethodGet, p.admin.URL + "/metrics", "", []string{"Host", adm}},
		{"metrics listener", http.MethodGet, metrics.URL + "/metrics", "", []string{"Host", met}},
		{"trailing dot", http.MethodGet, p.admin.URL + "/admin/stats", "", []string{"Host", "rebind.evil.example."}},
		{"malformed", http.MethodGet, p.admin.URL + "/admin/stats", "", []string{"Host", "[127.0.0.1]:80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, tc.method, tc.url, tc.body, tc.headers...)
			assertError(t, res, http.StatusMisdirectedRequest, "misdirected_request")
			if !strings.Contains(res.body, "--public-host") {
				t.Fatalf("the message names no flag: %s", res.body)
			}
		})
	}
	if !p.drain.Ready() {
		t.Fatal("a refused request drained the pod")
	}
	if got := p.metrics(t).Value("roomcast_host_refused_total"); got != 12 {
		t.Fatalf("roomcast_host_refused_total %v, want 12", got)
	}

	// Loopback names and addresses, and any IP address (a probe or a scrape by pod
	// IP), are served; the marker event is the first the stream sees, so nothing
	// refused above was published.
	port := func(base string) string { u, _ := url.Parse(base); return u.Port() }
	for _, host := range []string{"127.0.0.1:" + port(p.public.URL), "localhost:" + port(p.public.URL), "LocalHost.", "[::1]:" + port(p.public.URL), "127.3.2.1", "10.1.2.3:8080", "[2001:db8::1]"} {
		res := do(t, http.MethodPost, p.public.URL+"/rooms/r/events", "fine", "Host", host, "Content-Type", "text/plain")
		if res.status != http.StatusCreated {
			t.Fatalf("publish with Host %q: %d %s", host, res.status, res.body)
		}
		if res := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "", "Host", host); res.status != http.StatusOK {
			t.Fatalf("/admin/stats with Host %q: %d %s", host, res.status, res.body)
		}
	}
	if f := s.next(); f.seq(t) != 1 || !strings.Contains(f.data, `"body":"fine"`) {
		t.Fatalf("first event %+v", f)
	}
}

// TestPublicHosts: the names of Config.PublicHosts are served, with any port;
// *.example.com serves the names under example.com, not example.com itself; "*"
// serves every host.
func TestPublicHosts(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PublicHosts: []string{"Rooms.Example.com.", "*.apps.example.net"}}})
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"rooms.example.com", 200},
		{"ROOMS.example.com:443", 200},
		{"rooms.example.com.:8080", 200},
		{"a.apps.example.net", 200},
		{"a.b.apps.example.net:80", 200},
		{"localhost:9", 200},
		{"apps.example.net", 421},
		{"xapps.example.net", 421},
		{"example.com", 421},
		{"rooms.example.com.evil.example", 421},
		{"rebind.evil.example", 421},
	} {
		for _, base := range []string{p.public.URL + "/healthz", p.admin.URL + "/admin/stats"} {
			if res := do(t, http.MethodGet, base, "", "Host", tc.host); res.status != tc.status {
				t.Errorf("%s with Host %q: %d %s, want %d", base, tc.host, res.status, res.body, tc.status)
			}
		}
	}

	any := newPod(t, podConfig{gw: gateway.Config{PublicHosts: []string{"*"}}})
	if res := do(t, http.MethodGet, any.admin.URL+"/admin/stats", "", "Host", "rebind.evil.example"); res.status != 200 {
		t.Fatalf(`"*": %d %s`, res.status, res.body)
	}
}

func TestCheckHosts(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		err  string
	}{
		{in: []string{"Rooms.Example.COM."}, want: []string{"rooms.example.com"}},
		{in: []string{"*.example.com", "a_b.example.com"}, want: []string{"*.example.com", "a_b.example.com"}},
		{in: []string{"*"}, want: []string{"*"}},
		{in: []string{"10.0.0.5", "::1"}, want: []string{"10.0.0.5", "::1"}},
		{in: []string{"*", "a.example"}, err: "stand alone"},
		{in: []string{"rooms.example.com:443"}, err: "port"},
		{in: []string{"https://rooms.example.com"}, err: "scheme"},
		{in: []string{"a.*.example.com"}, err: "*"},
		{in: []string{"*.com"}, err: "top-level"},
		{in: []string{""}, err: "not a host name"},
		{in: []string{"a..b"}, err: "not a host name"},
		{in: []string{"rooms example"}, err: "not a host name"},
		{in: []string{strings.Repeat("a", 64) + ".example"}, err: "not a host name"},
	} {
		got, err := gateway.CheckHosts(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("CheckHosts(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",")):
			t.Errorf("CheckHosts(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
