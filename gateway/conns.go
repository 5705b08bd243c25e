package gateway

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// LimitListener wraps l so that one peer address (an IPv6 one by its /64, addrKey)
// holds at most MaxConnsPerIP open connections that are not serving a stream: a new
// connection beyond the cap is closed as soon as it is accepted, before anything is
// read from it. A connection leaves the count while it serves a stream
// (MaxStreamsPerIP bounds those) and joins it again when the stream ends. The counts
// hold one entry per address with an open connection, and no more. With no cap l is
// returned as is.
//
// The counts reach the stream handler through the connection: set the server's
// ConnContext to s.ConnContext.
func (s *Server) LimitListener(l net.Listener) net.Listener {
	if s.cfg.MaxConnsPerIP <= 0 {
		return l
	}
	return &connLimiter{Listener: l, max: s.cfg.MaxConnsPerIP, byIP: map[netip.Addr]int{}, refused: s.edgeM.connsRefused}
}

type connKey struct{}

// ConnContext is the http.Server ConnContext for a listener from LimitListener: it
// lets a stream take its connection out of the count.
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// uncounted serves a stream with its connection out of the per-address count.
func uncounted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			c.setCounted(false)
			defer c.setCounted(true)
		}
		h(w, r)
	}
}

type connLimiter struct {
	net.Listener
	max     int
	refused prometheus.Counter

	mu   sync.Mutex
	byIP map[netip.Addr]int
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := peerAddr(c.RemoteAddr())
		l.mu.Lock()
		ok := l.byIP[ip] < l.max
		if ok {
			l.byIP[ip]++
		}
		l.mu.Unlock()
		if ok {
			return &limitedConn{Conn: c, l: l, ip: ip, counted: true}, nil
		}
		l.refused.Inc()
		_ = c.Close()
	}
}

func (l *connLimiter) add(ip netip.Addr, d int) {
	l.mu.Lock()
	if l.byIP[ip] += d; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	l.mu.Unlock()
}

// peerAddr is the key of the connection's peer address (addrKey); the zero Addr
// when it is not an IP address (all such peers share one count).
func peerAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return addrKey(ta.AddrPort().Addr())
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return addrKey(ap.Addr())
}

// addrKey is what a per-address cap counts a client address as: an IPv4 address
// (mapped into IPv6 or not) as itself, an IPv6 address as its /64, the smallest
// network a site is given, so that one holder of a /64 cannot pass the cap by
// picking a new address for every connection.
func addrKey(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a
	}
	return netip.PrefixFrom(a, 64).Masked().Addr()
}

// limitedConn is a connection in its address's count while counted is set.
type limitedConn struct {
	net.Conn
	l  *connLimiter
	ip netip.Addr

	mu      sync.Mutex
	counted bool
	closed  bool
	// loop: the event loop took the connection, a stream's to its end, so it stays
	// out of the count when its handler returns.
	loop bool
}

// onLoop keeps the connection out of its address's count for good: the event loop
// serves its stream past the handler's return.
func (c *limitedConn) onLoop() {
	c.mu.Lock()
	c.loop = true
	c.mu.Unlock()
}

// setCounted moves the connection into or out of its address's count. A connection
// may join again beyond the cap: it is open already.
func (c *limitedConn) setCounted(counted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.loop || c.counted == counted {
		return
	}
	c.counted = counted
	if counted {
		c.l.add(c.ip, 1)
	} else {
		c.l.add(c.ip, -1)
	}
}

func (c *limitedConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.counted {
			c.counted = false
			c.l.add(c.ip, -1)
		}
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite keeps the half-close net/http uses to end a connection gracefully.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
