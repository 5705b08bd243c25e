package gateway

import (
	"io"
	"net"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3":                 "10.1.2.3",
		"::ffff:10.1.2.3":          "10.1.2.3",
		"2001:db8:1:2:3:4:5:6":     "2001:db8:1:2::",
		"2001:db8:1:2::1":          "2001:db8:1:2::",
		"2001:db8:1:3::1":          "2001:db8:1:3::",
		"fe80::1%eth0":             "fe80::",
		"::1":                      "::",
		"2001:db8:ffff:ffff:1::10": "2001:db8:ffff:ffff::",
	} {
		if got := addrKey(netip.MustParseAddr(in)); got.String() != want {
			t.Errorf("addrKey(%s) = %s, want %s", in, got, want)
		}
	}
}

// peerConn is one end of a pipe that says it comes from addr.
type peerConn struct {
	net.Conn
	addr net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.addr }

// pipeListener hands out the connections the test sends it.
type pipeListener struct{ conns chan net.Conn }

func (l pipeListener) Accept() (net.Conn, error) { return <-l.conns, nil }
func (l pipeListener) Close() error              { return nil }
func (l pipeListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestConnsPerIPv6Network: the addresses of one IPv6 /64 share a count, an IPv4
// address counts as itself whether mapped into IPv6 or not.
func TestConnsPerIPv6Network(t *testing.T) {
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	pl := pipeListener{conns: make(chan net.Conn, 1)}
	l := &connLimiter{Listener: pl, max: 2, byIP: map[netip.Addr]int{}, refused: refused}
	dial := func(addr string) (server, client net.Conn) {
		server, client = net.Pipe()
		t.Cleanup(func() { server.Close(); client.Close() })
		pl.conns <- peerConn{Conn: server, addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))}
		return server, client
	}
	accept := func(want string) {
		t.Helper()
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if got := c.RemoteAddr().String(); got != want {
			t.Fatalf("accepted %s, want %s", got, want)
		}
	}
	dial("[2001:db8:1:2::1]:1000")
	accept("[2001:db8:1:2::1]:1000")
	dial("[2001:db8:1:2:ffff::2]:1000")
	accept("[2001:db8:1:2:ffff::2]:1000")
	// A third address of the /64 is over the cap: closed, and the next is accepted.
	_, refusedClient := dial("[2001:db8:1:2::3]:1000")
	go dial("[2001:db8:1:3::1]:1000")
	accept("[2001:db8:1:3::1]:1000")
	if _, err := refusedClient.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the third connection of the /64 was not closed: %v", err)
	}
	var m dto.Metric
	if err := refused.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Fatalf("%v refused (%v), want 1", m.GetCounter().GetValue(), err)
	}
	dial("10.0.0.1:1")
	accept("10.0.0.1:1")
	dial("[::ffff:10.0.0.1]:2")
	accept("10.0.0.1:2") // net.TCPAddr shows the mapped address as IPv4
	_, refusedClient = dial("10.0.0.1:3")
	go dial("10.0.0.2:1")
	accept("10.0.0.2:1")
	if _, err := refusedClient.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a third connection of 10.0.0.1 was not closed: %v", err)
	}
}
