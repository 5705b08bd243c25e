package web

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var subscribePath = regexp.MustCompile(`^/rooms/[^/]+/events$`)

// frontProxy stands between the browser and a gateway, like a load
// balancer. It records every subscribe request (its resume point in header
// and query), can answer 503 to the next N of them or hold the next one
// back, and serves a blank same-origin page for module tests at /__harness.
type frontProxy struct {
	srv *httptest.Server

	mu   sync.Mutex
	fail int // answer 503 to this many more subscribe requests
	held *heldRequest
	log  []subscribeRequest
}

// heldRequest is the next subscribe request the proxy holds back (see hold).
type heldRequest struct {
	waiting chan struct{} // closed once the request waits
	through chan struct{} // closed to let it go on
	once    sync.Once
}

// subscribeRequest is one subscribe request as the proxy saw it.
type subscribeRequest struct {
	Room   string
	At     time.Time
	Header string // Last-Event-ID
	Query  string // lastEventId
	Status int    // 503 when the proxy refused it, else 200 (proxied)
}

func newFrontProxy(t *testing.T, g *gateway) *frontProxy {
	t.Helper()
	target, err := url.Parse(g.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	p := &frontProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		FlushInterval: -1, // pass every SSE frame on at once
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/__harness" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!doctype html><html lang=en><head><meta charset=utf-8><title>harness</title>"+
				"<link rel=icon href=data:,></head><body></body></html>")
			return
		}
		if r.Method == http.MethodGet && (subscribePath.MatchString(r.URL.Path) || r.URL.Path == "/events") {
			refuse, held := p.record(r)
			if refuse {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"error":"unavailable","message":"the test proxy refuses this request"}`)
				return
			}
			if held != nil {
				close(held.waiting)
				select {
				case <-held.through:
				case <-r.Context().Done():
					return
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(func() {
		// Open streams would make Close wait for ever.
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

// record logs a subscribe request and reports whether to refuse it, or else
// whether to hold it back.
func (p *frontProxy) record(r *http.Request) (refuse bool, held *heldRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	room := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/rooms/"), "/events")
	if r.URL.Path == "/events" {
		room = strings.Join(r.URL.Query()["room"], ",") // a multiplexed stream's rooms
	}
	req := subscribeRequest{
		Room:   room,
		At:     time.Now(),
		Header: r.Header.Get("Last-Event-ID"),
		Query:  r.URL.Query().Get("lastEventId"),
		Status: http.StatusOK,
	}
	if p.fail > 0 {
		p.fail--
		req.Status = http.StatusServiceUnavailable
		refuse = true
	} else {
		held, p.held = p.held, nil
	}
	p.log = append(p.log, req)
	return refuse, held
}

// hold makes the proxy hold back the next subscribe request it does not
// refuse until release is called (or the test ends): what a test does once
// arrived has returned happens while the client is reconnecting.
func (p *frontProxy) hold(t *testing.T) *heldRequest {
	t.Helper()
	h := &heldRequest{waiting: make(chan struct{}), through: make(chan struct{})}
	p.mu.Lock()
	p.held = h
	p.mu.Unlock()
	t.Cleanup(h.release)
	return h
}

// arrived waits until the held request has come, at most 15 s.
func (h *heldRequest) arrived(t *testing.T) {
	t.Helper()
	select {
	case <-h.waiting:
	case <-time.After(15 * time.Second):
		t.Fatal("no subscribe request reached the proxy within 15s")
	}
}

// release lets the held request go on to the gateway.
func (h *heldRequest) release() { h.once.Do(func() { close(h.through) }) }

// refuse makes the proxy answer 503 to the next n subscribe requests.
func (p *frontProxy) refuse(n int) {
	p.mu.Lock()
	p.fail = n
	p.mu.Unlock()
}

// requestsFor returns the subscribe requests for room seen so far.
func (p *frontProxy) requestsFor(room string) []subscribeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []subscribeRequest
	for _, r := range p.log {
		if r.Room == room {
			out = append(out, r)
		}
	}
	return out
}

// requests returns every subscribe request seen so far.
func (p *frontProxy) requests() []subscribeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

func (p *frontProxy) url(path string) string { return p.srv.URL + path }
