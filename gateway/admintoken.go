package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

var errAdminUnauthorized = newError(http.StatusUnauthorized, "unauthorized",
	"/admin/ and /debug/pprof/ need Authorization: Bearer <admin token>")

// adminGuard requires the admin token (Config.AdminToken) on /admin/* and /debug/*
// of the admin listener; /metrics and the operator page's files stay open, so that
// Prometheus needs no token and the page can load and ask for one. With no token
// configured it is next itself.
//
// It matches the router's path by prefix rather than guarding routes one by one, so
// that a route added under /admin/ later is guarded without a change here.
func (s *Server) adminGuard(next http.Handler) http.Handler {
	if s.cfg.AdminToken == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.AdminToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !adminGuarded(routePath(r)) || bearerMatches(r, want[:]) {
			next.ServeHTTP(w, r)
			return
		}
		s.edgeM.adminRefused.Inc()
		writeError(w, errAdminUnauthorized)
	})
}

// adminGuarded reports whether the router path p needs the admin token.
func adminGuarded(p string) bool {
	for _, prefix := range []string{"/admin", "/debug"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// bearerMatches compares the request's bearer token with a token's SHA-256 digest,
// digest to digest, so that neither content nor length leaks through timing.
func bearerMatches(r *http.Request, want []byte) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}
