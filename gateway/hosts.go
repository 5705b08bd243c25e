package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// CheckHosts validates the names the listeners serve (Config.PublicHosts) and
// returns them normalized: in lower case, without a trailing dot. Each is a host
// name (rooms.example.com), a pattern *.example.com that matches every name under
// example.com (not example.com itself), or "*" alone, which serves every host. Ports
// are not part of a name: every port matches. IP addresses are always served and
// need not be listed.
func CheckHosts(hosts []string) ([]string, error) {
	return checkList(hosts, "public host", "it serves every host", checkHost)
}

func checkHost(h string) (string, error) {
	if _, err := netip.ParseAddr(h); err == nil {
		return h, nil
	}
	n := strings.ToLower(strings.TrimSuffix(h, "."))
	name, wild := strings.CutPrefix(n, "*.")
	switch {
	case strings.ContainsAny(n, ":/[]"):
		return "", errors.New("want a host name such as rooms.example.com, without a scheme, port or path")
	case strings.Contains(name, "*"):
		return "", errors.New("a * may only stand alone or begin the name as *.")
	case !validHostName(name):
		return "", errors.New("not a host name: dot-separated labels of 1 to 63 letters, digits, - and _, at most 253 bytes")
	case wild && !strings.Contains(name, ".") && name != "localhost":
		return "", fmt.Errorf("*.%s would serve names under a top-level domain", name)
	}
	return n, nil
}

// validHostName reports whether s is a DNS name in lower case: dot-separated labels
// of letters, digits, - and _ (underscores appear in real names), 1 to 63 bytes each.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// hostPolicy decides which Host headers the listeners answer.
type hostPolicy struct {
	any      bool            // "*": every host
	exact    map[string]bool // names
	suffixes []string        // ".example.com" of each *.example.com
}

func newHostPolicy(hosts []string) hostPolicy {
	p := hostPolicy{exact: map[string]bool{}}
	for _, h := range hosts {
		switch {
		case h == "*":
			p.any = true
		case strings.HasPrefix(h, "*."):
			p.suffixes = append(p.suffixes, h[1:])
		default:
			p.exact[h] = true
		}
	}
	return p
}

// allows reports whether a request's Host header (r.Host) names a host the gateway
// serves: an IP address, localhost, or a name of Config.PublicHosts, with any port.
// An empty Host (HTTP/1.0) passes: no browser sends one.
//
// A page whose name rebinds to 127.0.0.1 is same-origin with the gateway to the
// browser, and its requests come from loopback: only the name it has to send in
// Host gives it away. An IP address cannot be rebound (its origin is the address
// itself), so every IP address passes, which keeps probes and scrapes by pod IP
// working.
func (p hostPolicy) allows(host string) bool {
	if p.any || host == "" {
		return true
	}
	name, ok := hostName(host)
	if !ok {
		return false
	}
	if name == "localhost" || p.exact[name] {
		return true
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	for _, s := range p.suffixes {
		if len(name) > len(s) && strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// hostName is a Host header's host without its port or IPv6 brackets, in lower
// case, without a trailing dot; ok is false when the header is malformed.
func hostName(host string) (name string, ok bool) {
	port := ""
	if rest, found := strings.CutPrefix(host, "["); found {
		i := strings.IndexByte(rest, ']')
		if i < 0 {
			return "", false
		}
		name, port = rest[:i], rest[i+1:]
		if port != "" && port[0] != ':' {
			return "", false
		}
		if a, err := netip.ParseAddr(name); err != nil || !a.Is6() {
			return "", false
		}
	} else {
		name = host
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			name, port = host[:i], host[i:]
		}
	}
	if len(port) > 1 {
		if _, err := strconv.ParseUint(port[1:], 10, 16); err != nil {
			return "", false
		}
	}
	return strings.ToLower(strings.TrimSuffix(name, ".")), true
}

// errMisdirected answers a request whose Host the gateway does not serve.
var errMisdirected = newError(http.StatusMisdirectedRequest, "misdirected_request",
	"this gateway does not serve the host this request names: list the names it serves with --public-host (localhost and IP addresses are always served)")

// hosts refuses, with 421, a request whose Host header the gateway does not serve
// (hostPolicy.allows), before anything else looks at it: the loopback trust of
// publishing and of an admin listener without a token must not extend to a page
// whose name was rebound to a loopback address.
func (s *Server) hosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostPolicy.allows(r.Host) {
			s.edgeM.hostRefused.Inc()
			w.Header().Set("Connection", "close")
			writeError(w, errMisdirected)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestScheme is the scheme the client used: https over TLS; behind a proxy that
// ends TLS, the first entry of X-Forwarded-Proto when it is http or https; else
// http. Trusting the header is safe where it is used, the same-origin check of a
// WebSocket upgrade (sameHost): that check stands against pages in a browser, and a
// page can add no header of its choosing to a WebSocket handshake (nor, without a
// preflight the gateway does not grant, to any other request); a client that is not
// a browser sends whatever Origin it likes anyway.
func requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	v, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case "http", "https":
		return v
	}
	return "http"
}
