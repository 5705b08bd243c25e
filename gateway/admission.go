package gateway

import (
	"net"
	"net/http"
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
	byIP map[string]int

	// rateMu serialises reading the clock with taking a token: rate.Limiter.Allow
	// reads time.Now before its own lock, so a caller descheduled in between hands
	// it an older time and the next caller is credited the same interval again
	// (golang/go#65508).
	rateMu sync.Mutex
}

func newAdmission(cfg Config) *admission {
	a := &admission{max: int64(cfg.MaxStreams), maxPerIP: cfg.MaxStreamsPerIP, ipHeader: cfg.ClientIPHeader, byIP: map[string]int{},
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
	ip, counted := "", false
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

func (a *admission) releaseIP(ip string) {
	a.mu.Lock()
	if a.byIP[ip]--; a.byIP[ip] <= 0 {
		delete(a.byIP, ip)
	}
	a.mu.Unlock()
}

// address is the client address r counts against per-address caps, and whether it
// counts at all: a loopback peer does not when loopback is uncapped.
func (a *admission) address(r *http.Request) (string, bool) {
	if a.loopbackUncapped && isLoopback(r.RemoteAddr) {
		return "", false
	}
	return a.clientIP(r), true
}

// clientIP is the peer's address, or, when a trusted proxy header is configured and
// present, the address the nearest proxy put there: the last entry of a list such
// as X-Forwarded-For, which the client cannot forge.
func (a *admission) clientIP(r *http.Request) string {
	if a.ipHeader != "" {
		if v := r.Header.Values(a.ipHeader); len(v) > 0 {
			last := v[len(v)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if ip := strings.TrimSpace(last); ip != "" {
				return ip
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
