package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/roomcast/roomcast/cmd/internal/size"
	"github.com/roomcast/roomcast/gateway"
)

// config is every flag of the gateway. Each flag has an environment twin,
// ROOMCAST_<NAME> with dashes as underscores (--redis ↔ ROOMCAST_REDIS); a flag given
// on the command line wins over its twin.
type config struct {
	Addr      string
	AdminAddr string
	Redis     string

	RedisTLSCA        string
	RedisPasswordFile string

	PublishWaitReplicas int
	RedisTimeout        time.Duration
	RedisSampleInterval time.Duration
	Hot                 hotFlags
	OccupancyInterval   time.Duration
	Rebalance           bool
	RebalanceMargin     float64
	RebalanceRate       float64

	History         int
	HistoryTTL      time.Duration
	MaxRooms        int
	MaxHistoryBytes byteSize

	RetryMin, RetryMax time.Duration
	Heartbeat          time.Duration
	WSPing             time.Duration
	WSPongTimeout      time.Duration
	WSRate             float64
	WSBurst            int
	WriteTimeout       time.Duration
	Queue              int
	QueueBytes         byteSize
	MaxQueuedBytes     byteSize
	RoomPolicy         stringList           // as given
	RoomPolicies       gateway.RoomPolicies // RoomPolicy, parsed
	Linger             time.Duration
	RecentBytes        byteSize

	AcceptRate      float64
	AcceptBurst     int
	MaxStreams      int
	MaxStreamsPerIP int
	ClientIPHeader  string
	// MaxStreamsPerUser caps the connections of one sub on the pod.
	MaxStreamsPerUser int

	MaxRoomsPerStream int

	MaxBody          byteSize
	MaxBatchBody     byteSize
	BodyTimeout      time.Duration
	MaxConnsPerIP    int
	OpenFileLimit    uint64 // the process's, read at start; 0: unknown
	PublishToken     string
	PublishTokenFile string
	Auth             authFlags

	MetricsAddr    string
	PublicHosts    stringList // normalized once checked
	AllowOrigin    string     // comma-separated; normalized once checked
	AdminTokenFile string
	AdminToken     string // read from AdminTokenFile

	DrainDelay   time.Duration
	DrainWindow  time.Duration
	DrainTimeout time.Duration

	LogLevel  string
	LogFormat string

	IdleLoop string // on or off

	// Cmdline is the command line with the values of secret flags replaced
	// (redactArgs), for /debug/pprof/cmdline.
	Cmdline []string
}

// newFlagSet registers every flag of the gateway on a new FlagSet, each bound to
// its field of c, whose byte sizes it first sets to their defaults. It is the one
// list of flags: parseConfig parses with it and the table of cmd/gateway/README.md is checked
// against it.
func newFlagSet(c *config) *flag.FlagSet {
	c.MaxHistoryBytes, c.QueueBytes, c.MaxQueuedBytes = 512<<20, 4<<20, 1<<30
	c.RecentBytes, c.MaxBody, c.MaxBatchBody = 64<<20, 64<<10, 1<<20
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	// Errors are returned as one line; only -help prints the usage.
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "public listener: rooms, publishing, /healthz, /readyz, web pages")
	fs.StringVar(&c.AdminAddr, "admin-addr", "127.0.0.1:9090", "admin listener: /metrics, /admin/stats, /admin/drain, pprof")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "listener serving /metrics alone, e.g. 0.0.0.0:9100; empty: /metrics stays on the admin listener")
	fs.StringVar(&c.Redis, "redis", "", "comma-separated Redis seed addresses; empty runs the embedded in-memory log")
	fs.StringVar(&c.RedisTLSCA, "redis-tls-ca", "", "fleet mode: PEM file of the CAs that sign the Redis servers' certificates (only with rediss://; default: the system's)")
	fs.StringVar(&c.RedisPasswordFile, "redis-password-file", "", "fleet mode: file holding the Redis password (instead of one in --redis, which shows in the process list); the user is the one in --redis, else default")
	fs.IntVar(&c.PublishWaitReplicas, "publish-wait-replicas", 0, "fleet mode: acknowledge a publish only once this many replicas have it (WAIT)")
	fs.DurationVar(&c.RedisTimeout, "redis-timeout", 2*time.Second, "fleet mode: bound on each Redis call, retries included")
	fs.DurationVar(&c.RedisSampleInterval, "redis-sample-interval", 15*time.Second, "fleet mode: how often the pod asks every Redis node about its own subscriber connections (CLIENT LIST TYPE pubsub), for the roomcast_redis_subscriber_* gauges")
	c.Hot.register(fs)
	registerOccupancy(fs, &c.OccupancyInterval)
	registerRebalance(fs, c)
	fs.IntVar(&c.History, "history", 1000, "events kept per room")
	fs.DurationVar(&c.HistoryTTL, "history-ttl", 24*time.Hour, "a room idle this long loses its history (new epoch next time); also the longest Event-TTL a publish may set")
	fs.IntVar(&c.MaxRooms, "max-rooms", 100000, "rooms held in memory (embedded mode); publishes to more get 503")
	fs.Var(&c.MaxHistoryBytes, "max-history-bytes", "memory for all room histories (embedded mode), e.g. 512MiB")
	fs.DurationVar(&c.RetryMin, "retry-min", 3*time.Second, "lower bound of the per-connection retry: hint")
	fs.DurationVar(&c.RetryMax, "retry-max", 6*time.Second, "upper bound of the per-connection retry: hint")
	fs.DurationVar(&c.Heartbeat, "heartbeat", 15*time.Second, "interval of heartbeat comments on idle streams")
	fs.DurationVar(&c.WSPing, "ws-ping", 20*time.Second, "interval of WebSocket pings")
	fs.DurationVar(&c.WSPongTimeout, "ws-pong-timeout", 10*time.Second, "how long a WebSocket ping may wait for its pong (or any frame) before the connection is closed with 4408")
	fs.Float64Var(&c.WSRate, "ws-rate", 50, "WebSocket messages per second a connection may send after its hello (token bucket; over it: an error frame, then close 1008; 0: no limit)")
	fs.IntVar(&c.WSBurst, "ws-burst", 100, "burst of the --ws-rate bucket")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 10*time.Second, "deadline of each write to a stream")
	fs.IntVar(&c.Queue, "queue", 256, "per-client queue, events")
	fs.Var(&c.QueueBytes, "queue-bytes", "per-client queue, bytes, e.g. 4MiB")
	fs.Var(&c.MaxQueuedBytes, "max-queued-bytes", "bytes queued to all clients of the pod; past it the clients furthest behind are closed first, or their queues shed by their rooms' --room-policy (0: no limit)")
	fs.Var(&c.RoomPolicy, "room-policy", "queue policy of the rooms a pattern covers, pattern=policy (ticker.*=latest, feed.*=drop-oldest, orders=close); repeatable or comma-separated; the longest pattern covering a room wins; close (the default): a client whose queue is full is closed and resumes by id; latest: its queue keeps only the newest event; drop-oldest: its queue drops the oldest half; both say what was skipped with a resync")
	fs.DurationVar(&c.Linger, "linger", 2*time.Second, "how long an empty room keeps its subscription (0: none)")
	fs.Var(&c.RecentBytes, "recent-bytes", "memory for the latest events of the pod's rooms (up to 1024 or --history per room, 1MiB each), which serve resumes without reading the log (0: none kept)")
	fs.Float64Var(&c.AcceptRate, "accept-rate", 1000, "new streams admitted per second per pod (token bucket; 0: no limit)")
	fs.IntVar(&c.AcceptBurst, "accept-burst", 2000, "burst of the --accept-rate bucket")
	fs.IntVar(&c.MaxStreams, "max-streams", 100000, "concurrent streams per pod (0: no cap)")
	fs.IntVar(&c.MaxStreamsPerUser, "max-streams-per-user", 0, "concurrent streams, multiplexed streams and WebSocket connections per authenticated user (the credential's sub) on this pod; anonymous ones are not counted (0: no cap)")
	fs.IntVar(&c.MaxStreamsPerIP, "max-streams-per-ip", 100, "concurrent streams per client address, IPv6 per /64 (loopback peers uncounted unless --client-ip-header is set), the --client-ip-header address behind a proxy (0: no cap)")
	fs.IntVar(&c.MaxRoomsPerStream, "max-rooms-per-stream", 32, "distinct rooms one multiplexed stream (GET /events?room=a&room=b) may follow, 1 to 64")
	fs.StringVar(&c.ClientIPHeader, "client-ip-header", "", "header a trusted proxy sets to the client address, e.g. X-Forwarded-For (last entry used when it is an IP address; otherwise the peer address); empty: the peer address")
	fs.Var(&c.MaxBody, "max-body", "publish body limit, e.g. 64KiB")
	fs.Var(&c.MaxBatchBody, "max-batch-body", "POST /events body limit, e.g. 1MiB")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", 10*time.Second, "how long a request body may take to arrive; past it the answer is 408 (streams are not bounded by it)")
	fs.IntVar(&c.MaxConnsPerIP, "max-conns-per-ip", 0, "open connections per peer address (IPv6: per /64) on the public listener, streams not counted; a new one beyond it is closed at once (unset: a quarter of the open-file limit, at most 65536; 0: no cap; behind a proxy every client shares the proxy's address)")
	fs.StringVar(&c.PublishToken, "publish-token", "", "static publisher bearer tokens, comma-separated; with none (and no JWT key) only loopback clients may publish")
	fs.StringVar(&c.PublishTokenFile, "publish-token-file", "", "file holding the publisher bearer tokens, one per line (instead of --publish-token, which shows in the process list)")
	c.Auth.register(fs)
	fs.Var(&c.PublicHosts, "public-host", "host names both listeners serve besides localhost and IP addresses (rooms.example.com, or *.example.com for every name under it), any port; repeatable or comma-separated; * alone serves every host; a request for another host gets 421 (DNS rebinding)")
	fs.StringVar(&c.AllowOrigin, "allow-origin", "", "comma-separated origins (https://app.example.com) whose pages may subscribe and publish from the browser (CORS with credentials); * alone allows every origin without credentials; empty: no CORS")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "file holding the bearer token /admin/ and /debug/pprof/ on the admin listener require; empty: no token (/metrics stays open either way)")
	fs.DurationVar(&c.DrainDelay, "drain-delay", 5*time.Second, "keep serving after SIGTERM before closing streams (preStop)")
	fs.DurationVar(&c.DrainWindow, "drain-window", 30*time.Second, "spread stream closes over this long")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 45*time.Second, "hard deadline of a drain; keep it below the pod's grace period")
	fs.StringVar(&c.IdleLoop, "idle-loop", defaultIdleLoop(), "on: streams and WebSocket connections wait between events on the pod's event-loop workers (one per core), without a goroutine each; off: a goroutine per connection (Linux has the loop; elsewhere on is refused)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", logAuto, "json (one JSON object a line), text (a start-up summary for a person, then slog text lines) or auto: text when stderr is a terminal, else json")
	return fs
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := newFlagSet(&c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage of gateway:")
			fs.PrintDefaults()
			return c, err
		}
		return c, explainParse(fs, err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fromEnv := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := EnvName(f.Name)
		if v := getenv(env); v != "" {
			fromEnv[f.Name] = true
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, refusal(f, v, err.Error(), map[string]bool{f.Name: true}))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	c.Auth.deriveQuota(set["max-anonymous-rooms-per-ip"] || fromEnv["max-anonymous-rooms-per-ip"])
	defaultConnsPerIP(&c, set["max-conns-per-ip"] || fromEnv["max-conns-per-ip"])
	if err := checkRanges(fs, &c, fromEnv); err != nil {
		return c, err
	}
	if _, _, err := redisConnection(c); err != nil {
		return c, err
	}
	if err := c.Hot.check(c.Redis != "", fromEnv); err != nil {
		return c, err
	}
	if err := checkPodID(c, set["pod-id"] || fromEnv["pod-id"], fromEnv); err != nil {
		return c, err
	}
	if err := checkAccess(&c, fromEnv); err != nil {
		return c, err
	}
	if err := checkRoomPolicies(&c, fromEnv); err != nil {
		return c, err
	}
	if err := c.Auth.check(); err != nil {
		return c, err
	}
	return c, checkToken(&c)
}

// checkRoomPolicies parses --room-policy into c.RoomPolicies.
func checkRoomPolicies(c *config, fromEnv map[string]bool) error {
	ps, err := gateway.ParseRoomPolicies(c.RoomPolicy)
	if err != nil {
		return fmt.Errorf("%s: %s", flagRef("room-policy", fromEnv), strings.TrimPrefix(err.Error(), "gateway: "))
	}
	c.RoomPolicies = ps
	return nil
}

// EnvName is a flag's environment twin: ROOMCAST_ and the name in capitals with
// dashes as underscores.
func EnvName(flagName string) string {
	return "ROOMCAST_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// byteSize is a flag value in bytes that accepts suffixes: 65536, 64KiB, 64KB, 1MiB,
// 1MB, 1GiB.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Get implements flag.Getter.
func (b *byteSize) Get() any { return *b }

func (b *byteSize) Set(s string) error {
	n, err := size.Parse(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

var _ flag.Getter = (*byteSize)(nil)

func environ(name string) string { return os.Getenv(name) }

// defaultIdleLoop is --idle-loop's default: on where the platform has the loop.
func defaultIdleLoop() string {
	if gateway.IdleLoopSupported {
		return gateway.IdleLoopOn.String()
	}
	return gateway.IdleLoopOff.String()
}
