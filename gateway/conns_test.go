package gateway_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
)

// limitedServer serves p's public router on a listener wrapped by LimitListener. It
// reports every connection the HTTP server closes on closed, and counts those it
// opened.
func limitedServer(t *testing.T, p *pod) (ts *httptest.Server, closed chan struct{}, opened *atomic.Int64) {
	t.Helper()
	ts = httptest.NewUnstartedServer(p.srv.Public())
	ts.Listener = p.srv.LimitListener(ts.Listener)
	ts.Config.ConnContext = p.srv.ConnContext
	closed, opened = make(chan struct{}, 1024), new(atomic.Int64)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	// A stream the idle loop took leaves net/http (StateHijacked): the loop tells
	// when it closes it.
	gateway.SetLoopClosedHook(p.srv, func(string) { closed <- struct{}{} })
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, closed, opened
}

// TestConnsPerIP: connections that are not streams are capped per peer address: one
// beyond the cap is closed at accept, streams do not count while they stream, and
// the pod answers again once the others close.
func TestConnsPerIP(t *testing.T) {
	const max = 3
	p := newPod(t, podConfig{gw: gateway.Config{MaxConnsPerIP: max}})
	ts, closed, opened := limitedServer(t, p)
	addr := ts.Listener.Addr().String()

	// More streams than the cap, each on its own connection, are all served.
	streamClient := &http.Client{Transport: &http.Transport{}}
	defer streamClient.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []*http.Response
	for i := 0; i < max+2; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/rooms/r/events", nil)
		res, err := streamClient.Do(req)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		buf := make([]byte, 6)
		if _, err := res.Body.Read(buf); err != nil || string(buf) != "retry:" {
			t.Fatalf("stream %d: %q %v", i, buf, err)
		}
		streams = append(streams, res)
	}

	// max idle connections are accepted (each answers a request); the next is closed.
	var idle []*rawConn
	for i := 0; i < max; i++ {
		rc := dialRaw(t, addr)
		rc.head(http.MethodGet, "/healthz")
		if res, _ := rc.response(); res.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i, res.StatusCode)
		}
		idle = append(idle, rc)
	}
	over := dialRaw(t, addr)
	over.closed()
	m := do(t, http.MethodGet, p.admin.URL+"/metrics", "").body
	if !strings.Contains(m, "roomcast_connections_refused_total 1") {
		t.Fatal("the refused connection was not counted")
	}

	// Once the idle connections close, a new one is served.
	for _, rc := range idle {
		rc.c.Close()
	}
	for range idle {
		<-closed
	}
	rc := dialRaw(t, addr)
	rc.head(http.MethodGet, "/healthz", "Connection", "close")
	if res, _ := rc.response(); res.StatusCode != 200 {
		t.Fatalf("healthz after the others closed: %d", res.StatusCode)
	}

	// Everything closed, the listener holds no count for the address.
	rc.closed()
	cancel()
	for _, res := range streams {
		res.Body.Close()
	}
	streamClient.CloseIdleConnections()
	for n := int64(len(idle)); n < opened.Load(); n++ {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d connections closed", n, opened.Load())
		}
	}
	if n := gateway.TrackedAddrs(ts.Listener); n != 0 {
		t.Fatalf("counts for %d addresses after every connection closed", n)
	}
}
