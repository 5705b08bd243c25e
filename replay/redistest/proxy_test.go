package redistest_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
)

// ping sends PING on c and reads the answer within d.
func ping(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// TestProxyBlackholeAndLatency: a proxy passes commands through; a blackhole keeps
// the connection open and silent; removing it ends the connections it held, and a
// new one works; latency delays the answer.
func TestProxyBlackholeAndLatency(t *testing.T) {
	p := redistest.Proxied(t, redistest.SharedStandalone(t))
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := ping(c, r, 2*time.Second); err != nil || got != "+PONG\r\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	remove := p.Blackhole(t)
	if got, err := ping(c, r, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("blackholed: %q, %v; want a timeout (no answer, no FIN)", got, err)
	}
	remove()
	if _, err := ping(c, r, 2*time.Second); err == nil {
		t.Fatal("the blackholed connection still answers after the blackhole went away")
	}
	c2, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	p.Latency(t, 300*time.Millisecond, 0, redistest.Downstream)
	start := time.Now()
	if got, err := ping(c2, r2, 5*time.Second); err != nil || got != "+PONG\r\n" {
		t.Fatalf("with latency: %q, %v", got, err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("the answer took %s through 300ms of latency", took)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
