package gateway_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// TestWSOriginScheme: the gateway's own origin is its scheme and host. On plain HTTP
// a page on https://<the same host> is another origin: its upgrade is refused, so it
// cannot ride the session cookie. Behind a proxy that ends TLS, the proxy's
// X-Forwarded-Proto says the scheme.
func TestWSOriginScheme(t *testing.T) {
	keys := gatewaytest.NewKeys(t)
	p := newMemSecurePod(t, keys, gateway.Config{})
	cookie := testCookie + "=" + p.token(t, "RS256", "ana", time.Hour, []string{"orders"}, nil)
	host := strings.TrimPrefix(p.public.URL, "http://")
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"https page, plain connection", []string{"Origin", "https://" + host}},
		{"http page, proxy says https", []string{"Origin", "http://" + host, "X-Forwarded-Proto", "https"}},
		{"ws scheme", []string{"Origin", "ws://" + host}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res, err := dialWSRaw(t, p.public.URL, new(atomic.Int64), append([]string{"Cookie", cookie}, tc.headers...)...)
			if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
				t.Fatalf("dial: %v, %v; want 403", err, res)
			}
		})
	}
	for i, h := range [][]string{
		{"Origin", "http://" + host},
		{"Origin", "https://" + host, "X-Forwarded-Proto", "https"},
		{"Origin", "HTTPS://" + host, "X-Forwarded-Proto", "HTTPS, http"},
	} {
		c := dialWS(t, p.pod, append([]string{"Cookie", cookie}, h...)...)
		c.welcome("c"+string(rune('1'+i)), boot1, map[string]string{"orders": ""})
	}
}
