package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
)

// FuzzEdge sends arbitrary requests through the public router and its edge checks
// (origin, credential, encoding, methods): every answer is a documented status, every
// error has the JSON shape, a 405 names its methods, a 401 its scheme, and a
// state-changing request a browser marks cross-site without a bearer credential never
// gets past the origin check.
func FuzzEdge(f *testing.F) {
	f.Add(uint8(2), "rooms/r/events", "cross-site", "", "", "", "text/plain", []byte("x"))
	f.Add(uint8(2), "rooms/r/events", "", "http://evil.example", "Bearer tok", "gzip", "application/json", []byte("1"))
	f.Add(uint8(2), "events", "same-origin", "", "Bearer tok", "identity", "application/json", []byte(`[{"room":"r","body":1}]`))
	f.Add(uint8(5), "healthz", "", "", "", "", "", []byte(nil))
	f.Add(uint8(1), "rooms/r/events", "", "", "", "", "", []byte(nil))
	f.Add(uint8(2), "rooms/r/events", "none", "null", "Basic dTpw", "br, identity", "text/plain; charset=utf-8", []byte("\x01\x02"))
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, "PURGE"}
	p := newPod(f, podConfig{gw: gateway.Config{PublishToken: "tok", MaxBody: 512}})
	h := p.srv.Public()
	f.Fuzz(func(t *testing.T, m uint8, path, site, origin, auth, encoding, contentType string, body []byte) {
		method := methods[int(m)%len(methods)]
		req := httptest.NewRequest(method, "http://127.0.0.1/", bytes.NewReader(body))
		if method == http.MethodGet {
			// A GET may open a stream, which lasts until its client goes away.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			defer cancel()
			req = req.WithContext(ctx)
		}
		req.URL.Path = "/" + path
		req.RemoteAddr = "127.0.0.1:1"
		for name, v := range map[string]string{"Sec-Fetch-Site": site, "Origin": origin, "Authorization": auth, "Content-Encoding": encoding, "Content-Type": contentType} {
			if v != "" {
				req.Header.Set(name, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 201, 206, 304, 400, 401, 403, 404, 405, 413, 415:
		default:
			t.Fatalf("%s /%s: status %d: %s", method, path, rec.Code, rec.Body)
		}
		bearer := strings.HasPrefix(strings.ToLower(auth), "bearer ")
		safe := method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
		if !safe && !bearer && (site == "cross-site" || site == "same-site") && rec.Code != http.StatusForbidden {
			t.Fatalf("%s /%s from %s without a bearer: %d %s", method, path, site, rec.Code, rec.Body)
		}
		if rec.Code < 400 || method == http.MethodHead {
			return
		}
		var e struct{ Error, Message string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Message == "" {
			t.Fatalf("%s /%s: %d with body %q", method, path, rec.Code, rec.Body)
		}
		switch {
		case rec.Code == 405 && rec.Header().Get("Allow") == "":
			t.Fatalf("%s /%s: 405 without Allow", method, path)
		case rec.Code == 401 && rec.Header().Get("WWW-Authenticate") != `Bearer realm="roomcast"`:
			t.Fatalf("%s /%s: 401 without a challenge", method, path)
		case rec.Code == 403 && e.Error == "cross_origin" && bearer:
			t.Fatalf("%s /%s: refused for its origin with a bearer credential", method, path)
		}
	})
}
