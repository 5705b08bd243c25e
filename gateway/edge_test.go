package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
)

// rawConn is a client connection that writes requests byte by byte as the test says.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The bound on a test that fails by hanging; a passing test never waits for it.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// head sends a request line and headers (name, value pairs) and no body.
func (rc *rawConn) head(method, path string, headers ...string) {
	rc.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, rc.c.RemoteAddr())
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(rc.c, b.String()); err != nil {
		rc.t.Fatal(err)
	}
}

// response reads one response; it fails the test if none comes within the bound.
func (rc *rawConn) response() (*http.Response, string) {
	rc.t.Helper()
	res, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.t.Fatalf("no answer: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		rc.t.Fatalf("reading the answer: %v", err)
	}
	return res, string(b)
}

// closed asserts that the server closes the connection (a reset counts: a client
// still sending when the server closes gets one).
func (rc *rawConn) closed() {
	rc.t.Helper()
	if n, err := rc.br.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		rc.t.Fatalf("the connection stayed open: read %d, %v", n, err)
	}
}

func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e struct{ Error, Message string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Message == "" {
		t.Fatalf("error body %q", body)
	}
	return e.Error
}

// TestBodyTimeout: a client that trickles a body is answered 408 and cut off once the
// body timeout has passed, however steadily it trickles.
func TestBodyTimeout(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{BodyTimeout: 300 * time.Millisecond}})
	addr := p.public.Listener.Addr().String()
	for _, path := range []string{"/rooms/r/events", "/events"} {
		t.Run(path, func(t *testing.T) {
			rc := dialRaw(t, addr)
			rc.head(http.MethodPost, path, "Content-Type", "application/json", "Content-Length", "1000")
			stop := make(chan struct{})
			trickled := make(chan struct{})
			go func() {
				defer close(trickled)
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := rc.c.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			res, body := rc.response()
			close(stop)
			<-trickled
			if res.StatusCode != http.StatusRequestTimeout || errorCode(t, body) != "request_timeout" {
				t.Fatalf("trickled body: %d %s", res.StatusCode, body)
			}
			rc.closed()
		})
	}
	// The pod still answers, and a body that arrives in time is published.
	if res := do(t, http.MethodGet, p.public.URL+"/healthz", ""); res.status != 200 {
		t.Fatalf("healthz %d", res.status)
	}
	p.publish(t, "r", `{"ok":true}`)
}

// TestEarlyErrorsDoNotWaitForTheBody: a request refused before its body is read is
// answered at once and its connection closed; the server does not first read (and
// wait for) the body it will not use.
func TestEarlyErrorsDoNotWaitForTheBody(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PublishToken: "s3cret"}})
	addr := p.public.Listener.Addr().String()
	json := []string{"Content-Type", "application/json", "Content-Length", "1000"}
	cases := []struct {
		name, method, path string
		headers            []string
		status             int
		code               string
	}{
		{"wrong token", http.MethodPost, "/rooms/r/events", append([]string{"Authorization", "Bearer wrong"}, json...), 401, "unauthorized"},
		{"no token, batch", http.MethodPost, "/events", json, 401, "unauthorized"},
		{"cross-site", http.MethodPost, "/rooms/r/events", append([]string{"Sec-Fetch-Site", "cross-site"}, json...), 403, "cross_origin"},
		{"compressed", http.MethodPost, "/rooms/r/events", append([]string{"Authorization", "Bearer s3cret", "Content-Encoding", "gzip"}, json...), 415, "unsupported_content_encoding"},
		{"wrong method", http.MethodPut, "/healthz", json, 405, "method_not_allowed"},
		{"chunked", http.MethodPost, "/rooms/r/events", []string{"Authorization", "Bearer wrong", "Content-Type", "application/json", "Transfer-Encoding", "chunked"}, 401, "unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, addr)
			rc.head(tc.method, tc.path, tc.headers...)
			res, body := rc.response() // not one byte of the body was sent
			if res.StatusCode != tc.status || errorCode(t, body) != tc.code {
				t.Fatalf("%d %s, want %d %s", res.StatusCode, body, tc.status, tc.code)
			}
			rc.closed()
		})
	}
}

// gatedLog holds every Append until the test opens the gate, or the request's
// context ends.
type gatedLog struct {
	*replay.MemoryLog
	entered chan struct{}
	gate    chan struct{}
}

// Unwrap is the log it wraps, whose control plane it has (replay.ControlOf).
func (l *gatedLog) Unwrap() replay.Log { return l.MemoryLog }

func (l *gatedLog) Append(ctx context.Context, room string, m replay.Message) (replay.Event, error) {
	l.entered <- struct{}{}
	select {
	case <-l.gate:
	case <-ctx.Done():
		return replay.Event{}, ctx.Err()
	}
	return l.MemoryLog.Append(ctx, room, m)
}

// TestBodyTimeoutEndsWithTheBody: the body timeout bounds the body only; a publish
// whose body has arrived is not cut off when the log takes longer than the bound.
func TestBodyTimeoutEndsWithTheBody(t *testing.T) {
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	log := &gatedLog{MemoryLog: mem, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	p := newPodOn(t, log, podConfig{gw: gateway.Config{BodyTimeout: 200 * time.Millisecond, PublishTimeout: time.Minute}})
	answer := make(chan string, 1)
	go func() {
		res, err := http.Post(p.public.URL+"/rooms/r/events", "application/json", strings.NewReader(`{"a":1}`))
		if err != nil {
			answer <- err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		answer <- fmt.Sprintf("%d %s", res.StatusCode, b)
	}()
	<-log.entered // the body has been read; the publish waits in the log
	// A request whose handler starts after the first one's is cut off at the bound:
	// once it has its 408, the first publish has outlived the bound too.
	rc := dialRaw(t, p.public.Listener.Addr().String())
	rc.head(http.MethodPost, "/rooms/r/events", "Content-Type", "application/json", "Content-Length", "10")
	if res, body := rc.response(); res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("the slow body: %d %s", res.StatusCode, body)
	}
	close(log.gate)
	if got := <-answer; !strings.HasPrefix(got, "201 ") {
		t.Fatalf("the publish that outlived the body timeout in the log: %s", got)
	}
}
