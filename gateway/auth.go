package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// authorizePublish checks a publisher's credential: the bearer token when one is
// configured, else a loopback peer address.
func (s *Server) authorizePublish(r *http.Request) *apiError {
	if s.tokenHash == nil {
		if isLoopback(r.RemoteAddr) {
			return nil
		}
		return errForbidden
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return errUnauthorized
	}
	// Compare digests so that neither content nor length leaks through timing.
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(sum[:], s.tokenHash) != 1 {
		return errUnauthorized
	}
	return nil
}

func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
