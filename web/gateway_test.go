package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// The stream settings every test gateway runs with: reconnects within
// 200–400 ms keep the tests quick, and a drain that finishes at once keeps
// restarts quick.
const (
	retryMin = 200 * time.Millisecond
	retryMax = 400 * time.Millisecond
)

var baseFlags = []string{
	"--retry-min", retryMin.String(),
	"--retry-max", retryMax.String(),
	"--heartbeat", "1s",
	"--drain-delay", "0s",
	"--drain-window", "100ms",
	"--drain-timeout", "2s",
}

// httpClient is the tests' own client, so its idle connections can be
// closed before the goroutine leak check.
var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4},
}

// gateway is one gateway process started by a test.
type gateway struct {
	*gatewaytest.Process
	t     *testing.T
	addr  string // public listener, host:port
	admin string // admin listener, host:port
}

// startGateway starts a gateway on loopback ports the kernel picks; extra flags
// are appended to the defaults.
func startGateway(t *testing.T, extra ...string) *gateway {
	t.Helper()
	return startGatewayAt(t, "127.0.0.1:0", "127.0.0.1:0", extra...)
}

// startGatewayAt starts a gateway on the given addresses, waits until both
// listeners accept, and stops it when the test ends. It is for browser tests
// (see requireGateway); launchGateway starts one for any test.
func startGatewayAt(t *testing.T, addr, admin string, extra ...string) *gateway {
	t.Helper()
	return launchGateway(t, requireGateway(t), addr, admin, extra...)
}

// launchGateway starts the gateway binary bin on the given addresses with the
// tests' flags and extra ones.
func launchGateway(t *testing.T, bin, addr, admin string, extra ...string) *gateway {
	t.Helper()
	args := append([]string{"--addr", addr, "--admin-addr", admin}, baseFlags...)
	p := gatewaytest.Start(t, gatewaytest.Options{Bin: bin, Args: append(args, extra...)})
	return &gateway{Process: p, t: t, addr: p.Addr(), admin: p.AdminAddr()}
}

// stop ends the process this test started: SIGTERM (a drain), a second
// SIGTERM after 5 s (the gateway then closes every stream at once), and
// SIGKILL if it is still running 5 s later. Calling it again is harmless.
func (g *gateway) stop() {
	if err := g.Stop(5 * time.Second); err != nil {
		g.t.Error(err)
	}
}

func (g *gateway) url(path string) string      { return "http://" + g.addr + path }
func (g *gateway) adminURL(path string) string { return "http://" + g.admin + path }

// published is the gateway's answer to a publish.
type published struct {
	Room  string `json:"room"`
	Epoch string `json:"epoch"`
	Seq   int    `json:"seq"`
	ID    string `json:"id"`
}

// publish posts a JSON body to a room and expects 201.
func (g *gateway) publish(room string, body any) published {
	g.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		g.t.Fatal(err)
	}
	var p published
	g.call(http.MethodPost, g.url("/rooms/"+url.PathEscape(room)+"/events"), "application/json", b, http.StatusCreated, &p)
	if p.Room != room || p.Epoch == "" || p.Seq <= 0 || p.ID != fmt.Sprintf("%s:%d", p.Epoch, p.Seq) {
		g.t.Fatalf("publish answer %+v does not describe an event of room %q", p, room)
	}
	return p
}

// publishN publishes n events {"n": i} and returns the answers.
func (g *gateway) publishN(room string, n int) []published {
	g.t.Helper()
	out := make([]published, n)
	for i := range out {
		out[i] = g.publish(room, map[string]int{"n": i})
	}
	return out
}

// adminStats is GET /admin/stats.
type adminStats struct {
	State             string         `json:"state"`
	Connections       int            `json:"connections"`
	Rooms             int            `json:"rooms"`
	Subscriptions     int            `json:"subscriptions"`
	Drops             map[string]int `json:"drops"`
	Published         int            `json:"published"`
	Delivered         int            `json:"delivered"`
	ConnectsPerSecond float64        `json:"connects_per_second"`
	ResumesPerSecond  float64        `json:"resumes_per_second"`
	UptimeSeconds     float64        `json:"uptime_seconds"`
}

func (g *gateway) stats() adminStats {
	g.t.Helper()
	var s adminStats
	g.call(http.MethodGet, g.adminURL("/admin/stats"), "", nil, http.StatusOK, &s)
	return s
}

// shed asks the gateway to end up to n open streams, as a drain would, and
// returns how many it closed.
func (g *gateway) shed(n int) int {
	g.t.Helper()
	var r struct {
		Closed int `json:"closed"`
	}
	g.call(http.MethodPost, g.adminURL(fmt.Sprintf("/admin/shed?count=%d", n)), "", nil, http.StatusOK, &r)
	return r.Closed
}

// call does one request, with header's name, value pairs, and decodes the
// JSON answer, failing the test on any other status.
func (g *gateway) call(method, u, ctype string, body []byte, want int, into any, header ...string) {
	g.t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := httpClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		g.t.Fatalf("%s %s: reading the answer: %v", method, u, err)
	}
	if res.StatusCode != want {
		g.t.Fatalf("%s %s: status %d, want %d; body %s", method, u, res.StatusCode, want, raw)
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			g.t.Fatalf("%s %s: answer is not the expected JSON: %v; body %s", method, u, err, raw)
		}
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
