package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strings"
	"time"
)

// Config is one run of the load generator, filled from flags.
type Config struct {
	// Scenario names the preset the run started from (see scenario.go); empty means
	// the plain flags alone.
	Scenario string
	// URL is the server's base URL, without a trailing slash: the first of URLs.
	URL string
	// URLs are the base URLs of every pod under load (-url, repeatable): subscriber i
	// streams from pod i%len(URLs), publishes go round-robin over them.
	URLs []string
	// AdminURLs are admin listeners (-admin-url, repeatable), the i-th one belonging
	// to the i-th -url: storm sheds through them, rolling-drain drains their pods.
	AdminURLs []string
	// AdminToken, read from -admin-token-file, is sent as a Bearer credential to
	// the admin listeners.
	AdminToken string
	// StormVia is how the storm scenario ends every stream: stormShed (the server,
	// POST /admin/shed) or stormClient (every subscriber closes its connection).
	StormVia string
	// StormAt is when, into the measured window, the storm begins.
	StormAt time.Duration
	// DrainCmd, when set, is run through sh -c to drain each pod instead of POST
	// /admin/drain (rolling-drain).
	DrainCmd string
	// DrainWait bounds the wait for one drained pod's streams to move elsewhere.
	DrainWait time.Duration
	// RebalanceWait bounds the rebalance scenario's wait for balanced pods.
	RebalanceWait time.Duration
	// ReportEvery is the interval of the periodic report line on stderr; 0 means none.
	ReportEvery time.Duration
	// PlotDir, when set, receives PNG plots of the timeline.
	PlotDir string
	// Bar is the progress bar mode: barAuto (when stderr is a terminal), barOn or
	// barOff.
	Bar string
	// Subs is the number of subscribers; subscriber i joins room RoomPrefix+(i%Rooms).
	Subs       int
	Rooms      int
	RoomPrefix string
	// Rate is publishes per second in total, spread round-robin over the rooms;
	// 0 means as fast as Publishers can go.
	Rate float64
	// Warmup runs the load without measuring; Duration is the measured window after
	// it (in -idle mode, how long the connections are held).
	Warmup   time.Duration
	Duration time.Duration
	// BodySize is the number of padding bytes in each published body.
	BodySize int
	// Publishers is the number of concurrent publishing goroutines.
	Publishers int
	// Token, when set, is sent as a Bearer credential with every publish.
	Token string
	// Batch > 1 publishes that many events per POST /events request.
	Batch int
	// Type is the event type to publish with; empty means the default type.
	Type string
	// TTL, when set, is every published event's time to live, as the gateway's
	// Event-TTL header takes it ("30s", or whole seconds): an event still queued
	// or replayed past it reaches subscribers as an expired marker, which the
	// report counts as expired, not lost.
	TTL string
	// Idle only opens and holds the subscriber connections; nothing is published.
	Idle bool
	// MetricsURL, when set, is the server's Prometheus exposition (roomcast's admin
	// /metrics): its go_goroutines is read before connecting and at the plateau.
	MetricsURL string
	// PID, when > 0, is the server process whose VmRSS is read before connecting and
	// after every connection is up.
	PID int
	// JSON also prints the final report as one JSON line.
	JSON bool
	// ConnectRate bounds new subscriber connections per second; 0 means unbounded.
	ConnectRate float64
	// ConnectTimeout bounds the wait for every subscriber's first connection.
	ConnectTimeout time.Duration
	// Settle bounds the wait, after publishing stops, for subscribers to receive
	// everything that was acknowledged.
	Settle time.Duration
	// RetryCap caps the server's retry: hint between reconnects.
	RetryCap time.Duration
	// MaxEvents bounds the number of events published in one run.
	MaxEvents int64
	// Progress is the interval of the progress line on stderr; 0 disables it.
	Progress time.Duration
	// Protocol is the wire the server speaks: protocolRoomcast (the gateway and the
	// yardstick hub) or protocolCentrifugo (uni_sse streams, the HTTP publish API).
	Protocol string
	// APIKey, read from -api-key-file, is sent as X-API-Key with every publish.
	APIKey string
	// TokenSecret, read from -token-secret-file, signs Centrifugo connection tokens.
	TokenSecret []byte
	// WSShare is the fraction of the subscribers, 0 to 1, that connect over GET /ws
	// instead of SSE, the same share of every room's members (see wsMember).
	WSShare float64
	// ServeHub, when set, serves the yardstick hub on this address instead of
	// generating load.
	ServeHub string
	// MuxStreams multiplexed SSE streams (GET /events?room=…) of MuxRooms rooms each
	// are held by the last MuxStreams × MuxRooms of the subscribers (mux.go).
	MuxStreams int
	MuxRooms   int
	// The chaos scenario (chaos.go): the seed of its fault schedule, the gateway
	// binary its fleet runs (empty: built from ./cmd/gateway), the fault kinds it
	// draws from, how many faults (0: as many as -duration holds), their nominal
	// spacing, and the bound on one fault's recovery.
	Seed          uint64
	Gateway       string
	Faults        []string
	FaultCount    int
	FaultGap      time.Duration
	RecoveryBound time.Duration
	// chaos is the running chaos scenario's fleet and schedule, set before the run.
	chaos *chaosRun
}

// parseFlags reads a Config from command-line arguments.
func parseFlags(args []string, output io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(output)
	urls := &stringList{def: []string{"http://127.0.0.1:8080"}}
	admins := &stringList{}
	fs.StringVar(&c.Scenario, "scenario", "", "named scenario whose defaults the other flags override: "+strings.Join(scenarioNames(), ", "))
	fs.Var(urls, "url", "server base `URL`; repeat for several pods (subscribers and publishes spread over them)")
	fs.Var(admins, "admin-url", "admin listener `URL` of the pod given by the -url at the same position (repeatable; storm, rolling-drain, rebalance: its sheds)")
	adminTokenFile := fs.String("admin-token-file", "", "`file` holding the bearer token for the admin listeners")
	fs.StringVar(&c.StormVia, "storm-via", "", "storm: how every stream ends: shed (POST /admin/shed; the default with -admin-url) or client")
	fs.DurationVar(&c.StormAt, "storm-at", 0, "storm: when into the measured window the storm begins (default a third of -duration)")
	fs.StringVar(&c.DrainCmd, "drain-cmd", "", "rolling-drain: `command` (sh -c) that drains one pod, instead of POST /admin/drain; env ROOMCAST_POD_URL, ROOMCAST_POD_ADMIN_URL, ROOMCAST_POD_INDEX")
	fs.DurationVar(&c.DrainWait, "drain-wait", time.Minute, "rolling-drain: bound on one pod's streams moving to the others")
	fs.DurationVar(&c.RebalanceWait, "rebalance-wait", 2*time.Minute, "rebalance: bound on the pods reaching max/mean streams per pod <= 1.2 after the last -url joins empty; past it the run exits 1")
	fs.DurationVar(&c.ReportEvery, "report-every", 0, "periodic report line on stderr every this long (0 = none; soak: 1m)")
	fs.StringVar(&c.PlotDir, "plot", "", "write deliveries-per-second.png, latency.png and reconnects.png of the timeline into `DIR`")
	fs.StringVar(&c.Bar, "bar", barAuto, "progress bar on stderr: auto (when stderr is a terminal), on or off; without it -progress prints lines")
	fs.IntVar(&c.Subs, "subs", 100, "number of subscribers")
	fs.IntVar(&c.Rooms, "rooms", 1, "number of rooms; subscriber i joins room <prefix><i%rooms>")
	fs.StringVar(&c.RoomPrefix, "room-prefix", "load-", "room name prefix")
	fs.Float64Var(&c.Rate, "rate", 100, "publishes per second in total (0 = as fast as possible)")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "load before measuring starts")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured window (with -idle: how long to hold)")
	fs.IntVar(&c.BodySize, "body-size", 64, "padding bytes per published body")
	fs.IntVar(&c.Publishers, "publishers", 8, "concurrent publishers")
	fs.StringVar(&c.Token, "token", "", "Bearer token for publishing")
	fs.IntVar(&c.Batch, "batch", 1, "events per request; > 1 publishes through POST /events")
	fs.StringVar(&c.Type, "type", "", "event type to publish (empty = default type)")
	fs.StringVar(&c.TTL, "ttl", "", "time to live of every published event, as Event-TTL (\"30s\", \"90\"; empty = none); expired markers count as expired, not lost")
	fs.BoolVar(&c.Idle, "idle", false, "only open -subs idle connections and hold them for -duration")
	fs.IntVar(&c.PID, "pid", 0, "server `PID` whose VmRSS is measured around connecting")
	fs.StringVar(&c.MetricsURL, "metrics-url", "", "the server's Prometheus `URL` (roomcast: the admin listener's /metrics) whose go_goroutines is read before connecting and at the plateau")
	fs.BoolVar(&c.JSON, "json", false, "also print the report as one JSON line")
	fs.Float64Var(&c.ConnectRate, "connect-rate", 2000, "new subscriber connections per second (0 = unbounded)")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", 60*time.Second, "bound on connecting every subscriber")
	fs.DurationVar(&c.Settle, "settle", 5*time.Second, "bound on waiting for in-flight deliveries after publishing stops")
	fs.DurationVar(&c.RetryCap, "retry-cap", 2*time.Second, "cap on the server's retry: between reconnects")
	fs.Int64Var(&c.MaxEvents, "max-events", 50_000_000, "bound on events published in one run")
	fs.DurationVar(&c.Progress, "progress", time.Second, "progress line interval on stderr (0 = off)")
	fs.StringVar(&c.Protocol, "protocol", protocolRoomcast, "wire the server speaks: roomcast (also the hub) or centrifugo")
	apiKeyFile := fs.String("api-key-file", "", "`file` holding the key sent as X-API-Key with every publish (Centrifugo's HTTP API)")
	secretFile := fs.String("token-secret-file", "", "`file` holding the HMAC secret that signs Centrifugo connection tokens")
	fs.Float64Var(&c.WSShare, "ws-share", 0, "`fraction` (0..1) of every room's subscribers that connect over WebSocket (GET /ws) instead of SSE (-protocol roomcast only); the report then has a line per transport")
	fs.StringVar(&c.ServeHub, "serve-hub", "", "serve the yardstick SSE hub on this `address` instead of generating load")
	fs.IntVar(&c.MuxStreams, "mux-streams", 0, "the last N×-mux-rooms subscribers hold N multiplexed SSE streams (GET /events?room=a&room=b…), one member per room")
	fs.IntVar(&c.MuxRooms, "mux-rooms", 3, "rooms each -mux-streams stream follows")
	fs.Uint64Var(&c.Seed, "seed", 1, "chaos: seed of the fault schedule (the same seed draws the same schedule)")
	fs.StringVar(&c.Gateway, "gateway", "", "chaos: gateway `binary` the fleet runs (default: go build ./cmd/gateway into a temporary directory)")
	faults := fs.String("faults", "", "chaos: comma-separated fault kinds to draw from (default all: "+strings.Join(faultKindNames(), ",")+")")
	fs.IntVar(&c.FaultCount, "fault-count", 0, "chaos: number of faults (0 = as many as -duration holds at -fault-gap)")
	fs.DurationVar(&c.FaultGap, "fault-gap", 15*time.Second, "chaos: nominal time between two faults (each drawn within ±25%; a fault also waits for the last one's recovery)")
	fs.DurationVar(&c.RecoveryBound, "recovery-bound", time.Minute, "chaos: bound on one fault's recovery (the fleet whole, every stream open and caught up)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *faults != "" {
		c.Faults = strings.Split(*faults, ",")
	}
	if err := applyScenario(fs, &c, admins); err != nil {
		return Config{}, err
	}
	for _, u := range urls.values() {
		c.URLs = append(c.URLs, strings.TrimRight(u, "/"))
	}
	c.URL = c.URLs[0]
	for _, u := range admins.values() {
		c.AdminURLs = append(c.AdminURLs, strings.TrimRight(u, "/"))
	}
	var err error
	if c.AdminToken, err = readSecret(*adminTokenFile); err != nil {
		return Config{}, err
	}
	if c.APIKey, err = readSecret(*apiKeyFile); err != nil {
		return Config{}, err
	}
	secret, err := readSecret(*secretFile)
	if err != nil {
		return Config{}, err
	}
	c.TokenSecret = []byte(secret)
	return c, c.validate()
}

// validate rejects configurations that cannot run.
func (c *Config) validate() error {
	if c.ServeHub != "" {
		return nil
	}
	var errs []error
	for _, u := range c.URLs {
		errs = append(errs, checkBaseURL("-url", u))
	}
	for _, u := range c.AdminURLs {
		errs = append(errs, checkBaseURL("-admin-url", u))
	}
	if c.MetricsURL != "" {
		errs = append(errs, checkBaseURL("-metrics-url", c.MetricsURL))
	}
	errs = append(errs, c.validateScenario())
	if c.Subs < 0 {
		errs = append(errs, errors.New("-subs must be >= 0"))
	}
	if c.Rooms < 1 {
		errs = append(errs, errors.New("-rooms must be >= 1"))
	}
	if c.Rate < 0 || c.ConnectRate < 0 {
		errs = append(errs, errors.New("-rate and -connect-rate must be >= 0"))
	}
	if c.Warmup < 0 || c.Duration <= 0 || c.Settle < 0 || c.ConnectTimeout <= 0 || c.RetryCap <= 0 {
		errs = append(errs, errors.New("-duration, -connect-timeout and -retry-cap must be > 0; -warmup and -settle >= 0"))
	}
	if c.BodySize < 0 {
		errs = append(errs, errors.New("-body-size must be >= 0"))
	}
	if c.Publishers < 1 || c.Batch < 1 || c.MaxEvents < 1 {
		errs = append(errs, errors.New("-publishers, -batch and -max-events must be >= 1"))
	}
	if strings.Trim(c.TTL, "0123456789.nsuµmh") != "" {
		errs = append(errs, fmt.Errorf("-ttl %q: want a duration such as 30s or whole seconds", c.TTL))
	}
	errs = append(errs, c.validateMux())
	if c.WSShare < 0 || c.WSShare > 1 || math.IsNaN(c.WSShare) {
		errs = append(errs, errors.New("-ws-share is a fraction of the subscribers: 0 to 1"))
	}
	switch c.Protocol {
	case protocolRoomcast:
	case protocolCentrifugo:
		if c.WSShare > 0 {
			errs = append(errs, errors.New("-ws-share: -protocol centrifugo speaks uni_sse only, WebSocket subscribers need -protocol roomcast"))
		}
		if c.Batch > 1 || c.Type != "" || c.TTL != "" {
			errs = append(errs, errors.New("-protocol centrifugo publishes one untyped event per request: no -batch, -type or -ttl"))
		}
		if c.Subs > 0 && len(c.TokenSecret) == 0 {
			errs = append(errs, errors.New("-protocol centrifugo with subscribers needs -token-secret-file"))
		}
	default:
		errs = append(errs, fmt.Errorf("-protocol %q: want %s or %s", c.Protocol, protocolRoomcast, protocolCentrifugo))
	}
	return errors.Join(errs...)
}

// checkBaseURL accepts http(s)://host[:port][/path].
func checkBaseURL(flagName, s string) error {
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: want http(s)://host[:port]", flagName, s)
	}
	return nil
}

// stringList is a repeatable string flag; its default holds until the first Set.
type stringList struct {
	def  []string
	vals []string
}

func (l *stringList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.values(), ",")
}

func (l *stringList) Set(s string) error {
	if s == "" {
		return errors.New("empty value")
	}
	l.vals = append(l.vals, s)
	return nil
}

// values returns what was set, or the default.
func (l *stringList) values() []string {
	if len(l.vals) > 0 {
		return l.vals
	}
	return l.def
}

// maxSecretBytes bounds a secret file.
const maxSecretBytes = 4 << 10

// readSecret returns the trimmed contents of path, or "" for no path.
func readSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("secret file %s: %w", path, err)
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("secret file %s: longer than %d bytes", path, maxSecretBytes)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("secret file %s: empty", path)
	}
	return s, nil
}

// roomName returns the name of room i.
func (c *Config) roomName(i int) string { return fmt.Sprintf("%s%d", c.RoomPrefix, i) }

// validateMux rejects multiplexed streams that cannot be laid out.
func (c *Config) validateMux() error {
	switch {
	case c.MuxStreams < 0 || c.MuxRooms < 1 || c.MuxRooms > 64:
		return errors.New("-mux-streams must be >= 0 and -mux-rooms 1 to 64")
	case c.MuxStreams == 0:
		return nil
	case c.MuxRooms > c.Rooms:
		return errors.New("-mux-rooms must not exceed -rooms: a stream follows distinct rooms")
	case c.MuxStreams*c.MuxRooms > c.Subs:
		return errors.New("-mux-streams × -mux-rooms members must fit in -subs")
	case c.Protocol != protocolRoomcast:
		return errors.New("-mux-streams needs -protocol roomcast")
	}
	return nil
}
