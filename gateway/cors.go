package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/cors"
)

// corsMaxAge is how long, in seconds, a browser may reuse a preflight's answer.
const corsMaxAge = 600

// corsAllowedHeaders are the request headers a page on an allowed origin may send:
// credentials, the publish body's type, the resume point, and the publish options.
var corsAllowedHeaders = []string{"Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key", "Event-Type", "Event-TTL", "Wait-For"}

// corsExposedHeaders are the response headers, beyond the CORS-safelisted ones, that
// a page may read: Retry-After on a 503 or a 429 says when to try again.
var corsExposedHeaders = []string{"Retry-After"}

// maxListEntries bounds --allow-origin and --public-host.
const maxListEntries = 256

// CheckOrigins validates a list of allowed origins and returns it normalized (the
// scheme and host in lower case, as browsers send them). Each origin is
// scheme://host[:port] with scheme http or https and no path, query, fragment or
// user; a port is explicit only when it is not the scheme's default, since a
// browser's Origin header never names the default port. "*" allows every origin,
// without credentials, and may only stand alone.
func CheckOrigins(origins []string) ([]string, error) {
	return checkList(origins, "allowed origin", "it allows every origin, without credentials", checkOrigin)
}

// checkList validates a configured list (what names an entry in messages): at most
// maxListEntries entries, each normalized by check, or "*" alone (all, as star says).
func checkList(list []string, what, star string, check func(string) (string, error)) ([]string, error) {
	if len(list) > maxListEntries {
		return nil, fmt.Errorf("gateway: %d %ss: at most %d", len(list), what, maxListEntries)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		if e == "*" {
			if len(list) > 1 {
				return nil, fmt.Errorf("gateway: %s \"*\" must stand alone: %s", what, star)
			}
			return []string{"*"}, nil
		}
		n, err := check(e)
		if err != nil {
			return nil, fmt.Errorf("gateway: %s %q: %w", what, e, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func checkOrigin(o string) (string, error) {
	if len(o) > 2048 {
		return "", errors.New("longer than 2048 bytes")
	}
	u, err := url.Parse(o)
	if err != nil {
		return "", errors.New("want scheme://host[:port]")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", errors.New("scheme must be http or https, as in https://app.example.com")
	case u.Opaque != "" || u.User != nil || u.Host == "":
		return "", errors.New("want scheme://host[:port]")
	case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.HasSuffix(o, "#"):
		return "", errors.New("an origin has no path, query or fragment (not even a trailing /)")
	case strings.ContainsAny(u.Host, "*%"):
		return "", errors.New("no wildcards or escapes: list each origin")
	}
	host := u.Hostname()
	if host == "" {
		return "", errors.New("no host")
	}
	if port := u.Port(); port != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(port)
		switch {
		case err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port:
			return "", errors.New("port must be a number between 1 and 65535")
		case scheme == "http" && n == 80, scheme == "https" && n == 443:
			return "", fmt.Errorf("drop the default port %d: browsers leave it out of Origin", n)
		}
	}
	n := scheme + "://" + strings.ToLower(u.Host)
	// The cross-origin protection must take it as well: it refuses what it cannot
	// match against an Origin header.
	if err := http.NewCrossOriginProtection().AddTrustedOrigin(n); err != nil {
		return "", err
	}
	return n, nil
}

// trustedOrigins are the allowed origins that the cross-origin protection lets
// through without a bearer credential: every listed origin, none in "*" mode (a
// page on any origin may then read streams and send requests with a bearer token,
// which needs a preflight, but not rely on the cookies a browser attaches itself).
func (s *Server) trustedOrigins() []string {
	if len(s.cfg.AllowOrigins) == 1 && s.cfg.AllowOrigins[0] == "*" {
		return nil
	}
	return s.cfg.AllowOrigins
}

// cors answers cross-origin requests from the allowed origins on the routes that
// pages call: the room streams, publishing, batches and tickets. Preflights on those
// routes are answered 204. Every answer on them varies by Origin, listed or not; an
// origin that is not listed gets no Access-Control-* header. Other routes (the web
// pages, health) are left as they are. With no allowed origins it is next itself.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.cfg.AllowOrigins) == 0 {
		return next
	}
	c := cors.New(cors.Options{
		AllowedOrigins:     s.cfg.AllowOrigins,
		AllowedMethods:     []string{http.MethodGet, http.MethodHead, http.MethodPost},
		AllowedHeaders:     corsAllowedHeaders,
		ExposedHeaders:     corsExposedHeaders,
		AllowCredentials:   s.trustedOrigins() != nil,
		MaxAge:             corsMaxAge,
		OptionsPassthrough: true,
	})
	routes := c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPreflight(r) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if corsRoute(routePath(r)) {
			routes.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isPreflight is the CORS library's own test for a preflight request.
func isPreflight(r *http.Request) bool {
	_, hasOrigin := r.Header["Origin"]
	return r.Method == http.MethodOptions && hasOrigin && r.Header.Get("Access-Control-Request-Method") != ""
}

// corsRoute reports whether the router path p is one of the routes pages call:
// /rooms/{room}/events, /events and /tickets.
func corsRoute(p string) bool {
	switch p {
	case "/events", "/tickets":
		return true
	}
	room, ok := strings.CutPrefix(p, "/rooms/")
	if !ok {
		return false
	}
	room, ok = strings.CutSuffix(room, "/events")
	return ok && room != "" && !strings.Contains(room, "/")
}

// routePath is the path the router matches a request on: the escaped path when it
// differs from the decoded one, as chi does.
func routePath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}
