package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
)

// Config configures a Server. Every zero value means "the default".
type Config struct {
	// RetryMin and RetryMax bound the per-connection retry: hint, drawn uniformly
	// (default 3s and 6s).
	RetryMin, RetryMax time.Duration
	// Heartbeat is the interval of ": hb" comments on an idle stream (default 15s).
	Heartbeat time.Duration
	// WriteTimeout is the deadline of each write to a stream; a client that takes no
	// bytes for that long is closed (default 10s).
	WriteTimeout time.Duration
	// MaxBody bounds a publish body, in bytes (default 64 KiB).
	MaxBody int64
	// MaxBatchBody bounds a POST /events body, in bytes (default 1 MiB).
	MaxBatchBody int64
	// MaxBatchItems bounds the items of one batch (default 1000).
	MaxBatchItems int
	// MaxTTL bounds the time to live a publish may give its event: the history's
	// lifetime (--history-ttl, default 24h). A longer one is refused (invalid_ttl).
	MaxTTL time.Duration
	// BodyTimeout bounds how long a request body may take to arrive, from the moment
	// its handler starts; past it the request is answered 408 and its connection
	// closed (default 10s). Requests without a body, streams among them, are not
	// bounded by it.
	BodyTimeout time.Duration
	// MaxConnsPerIP caps the connections one peer address (an IPv6 address by its
	// /64) may hold open on a listener wrapped by LimitListener, streams not counted
	// (zero: no cap).
	MaxConnsPerIP int
	// PublishToken, when set, is the bearer token publishers must send; when empty,
	// only loopback clients may publish. It is ignored when Auth is set (give the
	// keys to auth.Config.PublishKeys instead).
	PublishToken string
	// Auth authenticates subscribers and publishers. Nil: no JWT keys, open
	// subscribing, and publishing with PublishToken or from loopback. The Server
	// does not close it.
	Auth *auth.Authenticator
	// MaxTokenAge is how long a revocation is kept: the longest a credential it
	// refuses may live (default 24h).
	MaxTokenAge time.Duration
	// MaxAnonymousRooms caps the rooms that streams without a credential may hold on
	// the pod (every stream, when no JWT key is configured): a stream that would
	// take one more is turned away like any other the pod cannot take now (zero: no
	// cap). It bounds the subscriptions clients nobody knows can make a pod hold.
	MaxAnonymousRooms int
	// MaxAnonymousRoomsPerIP caps the rooms such streams from one client address may
	// hold on the pod, so that one client cannot take MaxAnonymousRooms from every
	// other: the address is the one MaxStreamsPerIP counts (ClientIPHeader's, else
	// the peer's; loopback peers uncounted under LoopbackUncapped), a stream that
	// would take one more is turned away the same way (zero: no quota).
	MaxAnonymousRoomsPerIP int
	// AllowOrigins lists the origins whose pages may call the room routes, POST
	// /events and POST /tickets from another origin (CORS, with credentials), each
	// scheme://host[:port]; state-changing requests from them pass the cross-origin
	// check. ["*"] allows every origin, without credentials, and trusts none for
	// state-changing requests. Empty: no CORS headers at all.
	AllowOrigins []string
	// PublicHosts lists the host names the listeners serve besides localhost and IP
	// addresses, which they always serve: names (rooms.example.com) or patterns
	// *.example.com (every name under example.com), any port; ["*"] serves every
	// host. A request whose Host header names another host is answered 421 (DNS
	// rebinding: a page whose name resolves to a loopback address would otherwise
	// share the loopback trust). Empty: localhost and IP addresses only.
	PublicHosts []string
	// AdminToken, when set, is the bearer token the admin listener requires on
	// /admin/* and /debug/*; /metrics and the operator page stay open. Empty: no
	// token is asked for.
	AdminToken string
	// Cmdline is the command line /debug/pprof/cmdline shows, with the values of
	// secrets already replaced (net/http/pprof's shows os.Args, tokens passed as
	// flags included). Nil: the program's name alone.
	Cmdline []string
	// MetricsApart, when set, takes /metrics off the admin listener: Metrics serves
	// it on a listener of its own. False: the admin listener serves it.
	MetricsApart bool
	// PodID names this pod in the occupancy answers of /admin/rooms, in the
	// WebSocket client registry and in the notices pods send each other; it must
	// pass replay.ValidPodID (default: the hostname, else "pod").
	PodID string
	// PublishTimeout bounds one publish's call to the log (default 5s).
	PublishTimeout time.Duration
	// ReplayBatch is how many history events one read fetches (default 256).
	ReplayBatch int
	// MaxRoomsPerStream bounds the distinct rooms of one multiplexed stream,
	// GET /events?room=a&room=b… (default 32).
	MaxRoomsPerStream int
	// AcceptRate is how many new streams per second the pod admits (token bucket;
	// zero: no limit), with bursts up to AcceptBurst.
	AcceptRate  float64
	AcceptBurst int
	// MaxStreams caps the pod's concurrent streams (zero: no cap).
	MaxStreams int
	// MaxStreamsPerIP caps concurrent streams per client address, an IPv6 address by
	// its /64 (zero: no cap).
	MaxStreamsPerIP int
	// LoopbackUncapped exempts loopback peers from MaxStreamsPerIP when no
	// ClientIPHeader is set: such a peer is the machine itself or a proxy on it, in
	// front of every client at once, and capping it would cap the pod.
	LoopbackUncapped bool
	// ClientIPHeader names a header set by a trusted proxy with the client's
	// address (for example X-Forwarded-For, whose last entry is used when it is an
	// IP address, with or without a port; otherwise the peer address is); empty: the
	// peer address. Only set it behind a proxy that always sets the header.
	ClientIPHeader string
	// WSPing is the interval of the pings the server sends on a WebSocket
	// connection (default 20s).
	WSPing time.Duration
	// WSPongTimeout is how long a ping may wait for its answer (its pong, or any
	// frame from the peer) before the connection is closed with 4408 (default 10s).
	WSPongTimeout time.Duration
	// WSRate is how many messages a second a WebSocket client may send after its
	// hello, in bursts of up to WSBurst (a token bucket per connection; zero: no
	// limit). See wsrate.go for what comes of an excess.
	WSRate  float64
	WSBurst int
	// MaxStreamsPerUser caps the concurrent streams, multiplexed streams and
	// WebSocket connections of one authenticated user (the credential's sub) on the
	// pod; connections without a sub are not counted (zero: no cap).
	MaxStreamsPerUser int
	// WSHelloTimeout is how long a WebSocket connection may take to say hello
	// before it is closed with 4408 (default 10s).
	WSHelloTimeout time.Duration
	// Owners is the registry of which connection owns each WebSocket client id,
	// shared by the fleet, and Notices carries the close notices pods send each
	// other about them. Nil: the log's (replay.ControlOf: the fleet's in Redis, the
	// pod's own in memory).
	Owners  clientOwners
	Notices podNotices
	// Occupancy is the fleet's record of who holds each room, which
	// /admin/rooms/{room} reports. Nil: the log's (replay.ControlOf); with none,
	// this pod's own count alone.
	Occupancy roomOccupancy
	// Streams is the fleet's record of each pod's open connections, which the pod
	// writes and, with Rebalance.On, compares itself with. Nil: the log's
	// (replay.ControlOf).
	Streams replay.FleetStreams
	// Rebalance says whether and how the pod sheds connections while it holds more
	// than its share of the fleet's (rebalance.go).
	Rebalance Rebalance
	// Tickets is the ticket store of the access control the server makes when Auth
	// is nil. Nil: the log's (replay.ControlOf).
	Tickets replay.Tickets
	// OwnerTTL is how long a client's claim lives unless refreshed; the connection
	// refreshes it every third of it (default 30s).
	OwnerTTL time.Duration
	// IdleLoop says where live connections wait between events: IdleLoopOn hands a
	// stream, once its headers, anchor and replay are written, to the pod's event-loop
	// workers (one per core), which watch its socket and write to it without a
	// goroutine of its own; IdleLoopOff keeps a goroutine per connection. The zero
	// value is IdleLoopOn where the platform has the loop (IdleLoopSupported), else
	// IdleLoopOff; IdleLoopOn where it has none is an error.
	IdleLoop IdleLoop
	// Connections is the registry of the pod's open connections: pass the one the
	// drain was made with (drain.New(conns, …)), so that drains pace and shed
	// connections rather than room members. Nil: a registry of the server's own.
	Connections *Connections
	// Registry receives the gateway's metrics and is served on /metrics (default: a
	// new registry).
	Registry *prometheus.Registry
	// Logger receives request-level errors (default slog.Default()).
	Logger *slog.Logger
}

// IdleLoop is where live connections wait between events (Config.IdleLoop).
type IdleLoop uint8

const (
	IdleLoopDefault IdleLoop = iota // on where supported, else off
	IdleLoopOn                      // the event-loop workers
	IdleLoopOff                     // a goroutine per connection
)

// ParseIdleLoop reads "on" or "off".
func ParseIdleLoop(v string) (IdleLoop, error) {
	switch v {
	case "on":
		return IdleLoopOn, nil
	case "off":
		return IdleLoopOff, nil
	}
	return IdleLoopDefault, fmt.Errorf("%q: must be on or off", v)
}

func (l IdleLoop) String() string {
	switch l {
	case IdleLoopOn:
		return "on"
	case IdleLoopOff:
		return "off"
	}
	return "default"
}

func (c *Config) fill() error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RetryMin, 3*time.Second)
	def(&c.RetryMax, 6*time.Second)
	def(&c.Heartbeat, 15*time.Second)
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.PublishTimeout, 5*time.Second)
	def(&c.BodyTimeout, 10*time.Second)
	def(&c.MaxTokenAge, 24*time.Hour)
	def(&c.WSPing, 20*time.Second)
	def(&c.WSPongTimeout, 10*time.Second)
	def(&c.WSHelloTimeout, 10*time.Second)
	def(&c.OwnerTTL, 30*time.Second)
	if c.IdleLoop == IdleLoopDefault {
		c.IdleLoop = IdleLoopOff
		if IdleLoopSupported {
			c.IdleLoop = IdleLoopOn
		}
	} else if c.IdleLoop == IdleLoopOn && !IdleLoopSupported {
		return errors.New("gateway: the idle loop needs Linux (epoll): set it off here")
	}
	if c.PodID == "" {
		if c.PodID, _ = os.Hostname(); !replay.ValidPodID(c.PodID) {
			c.PodID = "pod"
		}
	} else if !replay.ValidPodID(c.PodID) {
		return fmt.Errorf("gateway: pod id %q: must be 1 to %d printable ASCII bytes without spaces", c.PodID, replay.MaxPodIDLen)
	}
	if err := c.Rebalance.fill(); err != nil {
		return err
	}
	if c.MaxBody == 0 {
		c.MaxBody = 64 << 10
	}
	if c.MaxBatchBody == 0 {
		c.MaxBatchBody = 1 << 20
	}
	if c.MaxBatchItems == 0 {
		c.MaxBatchItems = 1000
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = 24 * time.Hour
	}
	if c.ReplayBatch == 0 {
		c.ReplayBatch = 256
	}
	if c.MaxRoomsPerStream == 0 {
		c.MaxRoomsPerStream = 32
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Cmdline == nil {
		c.Cmdline = os.Args[:min(len(os.Args), 1)]
	}
	if len(c.AllowOrigins) > 0 {
		origins, err := CheckOrigins(c.AllowOrigins)
		if err != nil {
			return err
		}
		c.AllowOrigins = origins
	}
	if len(c.PublicHosts) > 0 {
		hosts, err := CheckHosts(c.PublicHosts)
		if err != nil {
			return err
		}
		c.PublicHosts = hosts
	}
	switch {
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return fmt.Errorf("gateway: retry range %s..%s: need 0 < min <= max", c.RetryMin, c.RetryMax)
	case c.Heartbeat < time.Millisecond:
		// Streams tick at half the interval: below this it rounds to nothing.
		return fmt.Errorf("gateway: heartbeat %s: must be at least 1ms", c.Heartbeat)
	case c.WriteTimeout <= 0 || c.PublishTimeout <= 0 || c.BodyTimeout <= 0 || c.MaxTokenAge <= 0:
		return errors.New("gateway: write, publish and body timeouts must be positive")
	case c.MaxBody <= 0 || c.MaxBatchBody <= 0 || c.MaxBatchItems <= 0 || c.ReplayBatch <= 0 || c.MaxTTL < minTTL:
		return errors.New("gateway: body limits, batch items, replay batch and max TTL must be positive")
	case c.WSPing <= 0 || c.WSPongTimeout <= 0 || c.WSHelloTimeout <= 0 || c.OwnerTTL < 3*time.Millisecond:
		return errors.New("gateway: websocket ping, pong timeout, hello timeout and owner TTL must be positive")
	case c.WSRate < 0 || c.WSBurst < 0 || c.WSRate > 0 && c.WSBurst < 1:
		return errors.New("gateway: websocket rate must not be negative, and a rate needs a burst of at least 1")
	case c.MaxRoomsPerStream < 1 || c.MaxRoomsPerStream > MaxRoomsPerStreamLimit:
		return fmt.Errorf("gateway: rooms per stream %d: need 1 to %d", c.MaxRoomsPerStream, MaxRoomsPerStreamLimit)
	case c.AcceptRate < 0 || c.AcceptBurst < 0 || c.MaxStreams < 0 || c.MaxStreamsPerIP < 0 || c.MaxConnsPerIP < 0 || c.MaxAnonymousRooms < 0 || c.MaxAnonymousRoomsPerIP < 0 || c.MaxStreamsPerUser < 0:
		return errors.New("gateway: admission limits must not be negative")
	}
	return nil
}
