package gateway

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Why a stream was not admitted. The value names the metric label.
const (
	rejectDraining = "draining"
	rejectRate     = "rate"
	rejectCapacity = "capacity"
	rejectClientIP = "client_ip"
	// rejectAnonymousRooms: anonymous streams already hold as many rooms as they may.
	rejectAnonymousRooms = "anonymous_rooms"
	// rejectAnonymousRoomsIP: anonymous streams from the client's address already
	// hold as many rooms as they may.
	rejectAnonymousRoomsIP = "anonymous_rooms_ip"
)

// admission bounds new streams: a token bucket of stream starts per second for the
// pod, and caps on concurrent streams per pod and per client address. A stream it
// turns away is answered 200, a longer jittered retry: and an ended stream, never a
// status that makes EventSource give up.
type admission struct {
	limiter  *rate.Limiter // nil: no rate limit
	max      int64         // 0: no cap
	maxPerIP int           // 0: no cap
	ipHeader string        // trusted header naming the client address; empty: the peer
	// loopbackUncapped: loopback peers are not counted per address.
	loopbackUncapped bool

	open atomic.Int64
	mu   sync.Mutex
	byIP map[netip.Addr]int // by addrKey

	// rateMu serialises reading the clock with taking a token: rate.Limiter.Allow
	// reads time.Now before its own lock, so a caller descheduled in between hands
	// it an older time and the next caller is credited the same interval again
	// (golang/go#65508).
	rateMu sync.Mutex
}

func newAdmission(cfg Config) *admission {
	a := &admission{max: int64(cfg.MaxStreams), maxPerIP: cfg.MaxStreamsPerIP, ipHeader: cfg.ClientIPHeader, byIP: map[netip.Addr]int{},
		loopbackUncapped: cfg.LoopbackUncapped && cfg.ClientIPHeader == ""}
	if cfg.AcceptRate > 0 {
		a.limiter = rate.NewLimiter(rate.Limit(cfg.AcceptRate), max(cfg.AcceptBurst, 1))
	}
	return a
}

// admit reserves a place for a new stream. On success release must be called when
// the stream ends; otherwise reason says why it was turned away.
func (a *admission) admit(r *http.Request) (release func(), reason string) {
	if a.max > 0 && a.open.Load() >= a.max {
		return nil, rejectCapacity
	}
	// counted: the stream holds a place in byIP[ip], which release gives back.
	var ip netip.Addr
	counted := false
	if a.maxPerIP > 0 {
		ip, counted = a.address(r)
	}
	if counted {
		a.mu.Lock()
		if a.byIP[ip] >= a.maxPerIP {
			a.mu.Unlock()
			return nil, rejectClientIP
		}
		a.byIP[ip]++
		a.mu.Unlock()
	}
	releaseIP := func() {
		if counted {
			a.releaseIP(ip)
		}
	}
	if a.limiter != nil && !a.allowRate() {
		releaseIP()
		return nil, rejectRate
	}
	if n := a.open.Add(1); a.max > 0 && n > a.max {
		a.open.Add(-1)
		releaseIP()
		return nil, rejectCapacity
	}
	return func() {
		a.open.Add(-1)
		releaseIP()
	}, ""
}

func (a *admission) allowRate() bool {
	a.rateMu.Lock()
	defer a.rateMu.Unlock()
	return a.limiter.AllowN(time.Now(), 1)
}

func (a *admission) releaseIP(ip netip.Addr) {
	a.mu.Lock()
	if a.byIP[ip]--; a.byIP[ip] <= 0 {
		delete(a.byIP, ip)
	}
	a.mu.Unlock()
}

// address is the client address r counts against per-address caps (clientIP), and
// whether it counts at all: a loopback peer does not when loopback is uncapped.
func (a *admission) address(r *http.Request) (netip.Addr, bool) {
	if a.loopbackUncapped && isLoopback(r.RemoteAddr) {
		return netip.Addr{}, false
	}
	return a.clientIP(r), true
}

// clientIP is what the per-address cap counts a request as (addrKey, so an IPv6
// address by its /64): when a trusted proxy header is configured and its last entry
// is an IP address, that address, which the nearest proxy put there and the client
// cannot forge (the last entry of a list such as X-Forwarded-For); otherwise the
// peer's address. An entry that is not an address (a name, "unknown", a typo of the
// proxy's) is not counted as one: every such request would be a new "address".
// Requests from a peer that is not an IP address share the zero Addr.
func (a *admission) clientIP(r *http.Request) netip.Addr {
	if a.ipHeader != "" {
		if v := r.Header.Values(a.ipHeader); len(v) > 0 {
			if ip, ok := forwardedAddr(v[len(v)-1]); ok {
				return addrKey(ip)
			}
		}
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return addrKey(ap.Addr())
	}
	return netip.Addr{}
}

// forwardedAddr is the last entry of a proxy header's list (X-Forwarded-For:
// client, proxy1, proxy2), when it is an IP address, with or without a port.
func forwardedAddr(v string) (netip.Addr, bool) {
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	v = strings.TrimSpace(v)
	if ip, err := netip.ParseAddr(v); err == nil {
		return ip, true
	}
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr(), true
	}
	return netip.Addr{}, false
}
