package gateway

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzHostPolicy: any Host header and any --public-host value. A normalized list is
// its own normalization; a port or ASCII case never changes the answer; and a host
// passes only as an IP address, localhost, or a name the list holds or matches.
func FuzzHostPolicy(f *testing.F) {
	for _, host := range []string{"localhost:8080", "[::1]:80", "rebind.evil.example", "a.apps.example.net:443",
		"[127.0.0.1]", "", "x:", "[::1", "ROOMS.example.com.", "10.0.0.1:99999", "[fe80::1%25eth0]:1"} {
		f.Add(host, "*.apps.example.net")
		f.Add(host, "rooms.example.com")
	}
	f.Fuzz(func(t *testing.T, host, pattern string) {
		hosts, err := CheckHosts([]string{pattern})
		if err == nil {
			again, err := CheckHosts(hosts)
			if err != nil || len(again) != 1 || again[0] != hosts[0] {
				t.Fatalf("CheckHosts(%q) = %q, then %q, %v", pattern, hosts, again, err)
			}
		} else {
			hosts = nil
		}
		p := newHostPolicy(hosts)
		ok := p.allows(host)
		if host != "" && !strings.ContainsAny(host, ":[]") && p.allows(host+":8080") != ok {
			t.Fatalf("%q: %v, but with a port %v", host, ok, !ok)
		}
		if p.allows(asciiUpper(host)) != ok {
			t.Fatalf("%q: %v, but in upper case %v", host, ok, !ok)
		}
		if !ok || host == "" || p.any {
			return
		}
		name, _ := hostName(host)
		if _, err := netip.ParseAddr(name); err == nil || name == "localhost" || p.exact[name] {
			return
		}
		if len(hosts) == 1 && strings.HasPrefix(hosts[0], "*.") && strings.HasSuffix(name, hosts[0][1:]) {
			return
		}
		t.Fatalf("%q passes with %q", host, hosts)
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
