package main

import (
	"flag"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/roomcast/roomcast/cmd/internal/size"
	"github.com/roomcast/roomcast/gateway"
)

// bound is the range a numeric flag accepts, in the flag's unit: nanoseconds for
// durations, bytes for sizes. When zero is set, 0 is accepted too and means it.
type bound struct {
	min, max float64
	zero     string
}

// ranges is every numeric flag's range. Values outside it break the service or make
// no sense; a flag missing here is a bug (TestEveryNumericFlagHasARange).
var ranges = map[string]bound{
	"heartbeat":             {min: float64(time.Second), max: float64(10 * time.Minute)},
	"ws-ping":               {min: float64(time.Second), max: float64(10 * time.Minute)},
	"ws-pong-timeout":       {min: float64(100 * time.Millisecond), max: float64(10 * time.Minute)},
	"ws-rate":               {min: 0.01, max: 1e6, zero: "no limit"},
	"ws-burst":              {min: 1, max: 1e6},
	"max-streams-per-user":  {min: 1, max: 1e7, zero: "no cap"},
	"write-timeout":         {min: float64(100 * time.Millisecond), max: float64(10 * time.Minute)},
	"retry-min":             {min: float64(100 * time.Millisecond), max: float64(10 * time.Minute)},
	"retry-max":             {min: float64(100 * time.Millisecond), max: float64(10 * time.Minute)},
	"queue":                 {min: 1, max: 65536},
	"queue-bytes":           {min: 1 << 10, max: 1 << 30},
	"max-queued-bytes":      {min: 1 << 10, max: 1 << 40, zero: "no limit"},
	"linger":                {min: 0, max: float64(10 * time.Minute)},
	"recent-bytes":          {min: 64 << 10, max: 1 << 40, zero: "none kept"},
	"history":               {min: 1, max: 1e6},
	"history-ttl":           {min: float64(time.Second), max: float64(30 * 24 * time.Hour)},
	"max-rooms":             {min: 1, max: 1e7},
	"max-history-bytes":     {min: 64 << 10, max: 1 << 40},
	"accept-rate":           {min: 0.01, max: 1e6, zero: "no limit"},
	"accept-burst":          {min: 1, max: 1e6},
	"max-streams":           {min: 1, max: 1e7, zero: "no cap"},
	"max-streams-per-ip":    {min: 1, max: 1e6, zero: "no cap"},
	"max-body":              {min: 1, max: 16 << 20},
	"max-batch-body":        {min: 1, max: 64 << 20},
	"body-timeout":          {min: float64(time.Second), max: float64(5 * time.Minute)},
	"max-conns-per-ip":      {min: 1, max: 65536, zero: "no cap"},
	"redis-timeout":         {min: float64(10 * time.Millisecond), max: float64(time.Minute)},
	"redis-sample-interval": {min: float64(100 * time.Millisecond), max: float64(10 * time.Minute)},
	"publish-wait-replicas": {min: 0, max: 16},
	"hot-room-partitions":   {min: 2, max: 64},
	"occupancy-interval":    {min: float64(100 * time.Millisecond), max: float64(time.Minute)},
	"rebalance-margin":      {min: 0.01, max: 10},
	"rebalance-rate":        {min: 0.001, max: 10},
	"drain-delay":           {min: 0, max: float64(10 * time.Minute)},
	"drain-window":          {min: 0, max: float64(time.Hour)},
	"drain-timeout":         {min: float64(time.Second), max: float64(2 * time.Hour)},
	"ticket-ttl":            {min: float64(time.Second), max: float64(10 * time.Minute)},
	"max-token-age":         {min: float64(time.Minute), max: float64(365 * 24 * time.Hour)},
	"max-anonymous-rooms":   {min: 1, max: 1e7, zero: "no cap"},
	"max-rooms-per-stream":  {min: 1, max: 64},

	"max-anonymous-rooms-per-ip": {min: 1, max: 1e7, zero: "no quota"},
}

// checkRanges checks every numeric flag against its range, and the flags whose
// values are words or addresses. fromEnv names the flags set through their
// environment twin, so that the message can say where a bad value came from.
func checkRanges(fs *flag.FlagSet, c *config, fromEnv map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		b, ok := ranges[f.Name]
		if !ok {
			return
		}
		v, ok := numeric(f.Value)
		if !ok {
			err = fmt.Errorf("--%s: no numeric value", f.Name)
			return
		}
		if inRange(v, b) {
			return
		}
		err = fmt.Errorf("%s %s: must be %s", flagRef(f.Name, fromEnv), f.Value, describe(f.Value, b))
	})
	if err != nil {
		return err
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("%s %q: must be debug, info, warn or error", flagRef("log-level", fromEnv), c.LogLevel)
	}
	if _, err := gateway.ParseIdleLoop(c.IdleLoop); err != nil {
		return fmt.Errorf("%s %w", flagRef("idle-loop", fromEnv), err)
	}
	switch strings.ToLower(c.LogFormat) {
	case logAuto, logJSON, logText:
	default:
		return fmt.Errorf("%s %q: must be auto, json or text", flagRef("log-format", fromEnv), c.LogFormat)
	}
	if err := checkListenAddr(c.Addr); err != nil {
		return fmt.Errorf("%s %q: %w", flagRef("addr", fromEnv), c.Addr, err)
	}
	if err := checkListenAddr(c.AdminAddr); err != nil {
		return fmt.Errorf("%s %q: %w", flagRef("admin-addr", fromEnv), c.AdminAddr, err)
	}
	if h := c.ClientIPHeader; h != "" && !validHeaderName(h) {
		return fmt.Errorf("%s %q: must be a header name (letters, digits and -)", flagRef("client-ip-header", fromEnv), h)
	}
	return nil
}

// checkRelations checks the flags that bound one another, once every flag and
// environment twin is read; parseConfig checks each flag on its own.
func (c config) checkRelations() error {
	switch {
	case c.RetryMin > c.RetryMax:
		return fmt.Errorf("--retry-min %s: must not exceed --retry-max %s", fmtDuration(c.RetryMin), fmtDuration(c.RetryMax))
	case c.MaxBatchBody < c.MaxBody:
		return fmt.Errorf("--max-batch-body %s: must be at least --max-body %s", size.Format(int64(c.MaxBatchBody)), size.Format(int64(c.MaxBody)))
	case c.MaxQueuedBytes != 0 && c.MaxQueuedBytes < c.QueueBytes:
		return fmt.Errorf("--max-queued-bytes %s: must be 0 (no limit) or at least --queue-bytes %s", size.Format(int64(c.MaxQueuedBytes)), size.Format(int64(c.QueueBytes)))
	case c.DrainTimeout <= c.DrainDelay+c.DrainWindow:
		return fmt.Errorf("--drain-timeout %s: must exceed --drain-delay %s + --drain-window %s",
			fmtDuration(c.DrainTimeout), fmtDuration(c.DrainDelay), fmtDuration(c.DrainWindow))
	case c.Addr == c.AdminAddr && !strings.HasSuffix(c.Addr, ":0"):
		return fmt.Errorf("--admin-addr %q: must differ from --addr (admin routes are never on the public listener)", c.AdminAddr)
	}
	return nil
}

func flagRef(name string, fromEnv map[string]bool) string {
	if fromEnv[name] {
		return "--" + name + " (" + EnvName(name) + ")"
	}
	return "--" + name
}

// numeric is a flag's value as a number in its unit.
func numeric(v flag.Value) (float64, bool) {
	g, ok := v.(flag.Getter)
	if !ok {
		return 0, false
	}
	switch x := g.Get().(type) {
	case time.Duration:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case byteSize:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func inRange(v float64, b bound) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if v == 0 && b.zero != "" {
		return true
	}
	return v >= b.min && v <= b.max
}

// describe is the range in words, in the flag's own unit.
func describe(v flag.Value, b bound) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			f = func(x float64) string { return fmtDuration(time.Duration(x)) }
		case byteSize:
			f = func(x float64) string { return size.Format(int64(x)) }
		}
	}
	s := "between " + f(b.min) + " and " + f(b.max)
	if b.zero != "" {
		s = "0 (" + b.zero + ") or " + s
	}
	return s
}

// fmtDuration drops the zero units time.Duration.String leaves: 10m, not 10m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// checkListenAddr accepts host:port with an explicit host and a numeric port (0: the
// kernel picks one).
func checkListenAddr(addr string) error {
	if addr == "" {
		return fmt.Errorf("must not be empty: an empty address binds every interface (write 0.0.0.0:PORT to mean that)")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, e.g. 127.0.0.1:8080")
	}
	if host == "" {
		return fmt.Errorf("needs an explicit host: an empty host binds every interface (write 0.0.0.0:%s to mean that)", port)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port must be a number between 0 and 65535")
	}
	return nil
}

func validHeaderName(h string) bool {
	for _, r := range h {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return len(h) <= 128
}

// effective is every setting in effect as log attributes, for the start-up line.
// The token is never printed, only whether one is set; Redis credentials are
// hidden.
func (c config) effective() []any {
	redis, _ := parseRedis(c.Redis)
	return []any{
		"redis", redis.String(), "redis_tls_ca", c.RedisTLSCA, "redis_password_file", c.RedisPasswordFile, "redis_timeout", fmtDuration(c.RedisTimeout), "redis_sample_interval", fmtDuration(c.RedisSampleInterval), "publish_wait_replicas", c.PublishWaitReplicas,
		"hot_rooms", c.Hot.Rooms, "hot_room_partitions", c.Hot.Partitions, "pod_id", c.Hot.PodID,
		"occupancy_interval", fmtDuration(c.OccupancyInterval),
		"rebalance", c.Rebalance, "rebalance_margin", c.RebalanceMargin, "rebalance_rate", c.RebalanceRate,
		"history", c.History, "history_ttl", fmtDuration(c.HistoryTTL), "max_rooms", c.MaxRooms, "max_history_bytes", int64(c.MaxHistoryBytes),
		"retry_min", fmtDuration(c.RetryMin), "retry_max", fmtDuration(c.RetryMax), "heartbeat", fmtDuration(c.Heartbeat),
		"write_timeout", fmtDuration(c.WriteTimeout), "queue", c.Queue, "queue_bytes", int64(c.QueueBytes),
		"max_queued_bytes", int64(c.MaxQueuedBytes), "room_policy", c.RoomPolicies.String(), "linger", fmtDuration(c.Linger),
		"recent_bytes", int64(c.RecentBytes),
		"accept_rate", c.AcceptRate, "accept_burst", c.AcceptBurst, "max_streams", c.MaxStreams,
		"max_streams_per_ip", c.MaxStreamsPerIP, "max_streams_per_user", c.MaxStreamsPerUser, "client_ip_header", c.ClientIPHeader, "max_rooms_per_stream", c.MaxRoomsPerStream,
		"max_body", int64(c.MaxBody), "max_batch_body", int64(c.MaxBatchBody), "max_conns_per_ip", c.MaxConnsPerIP, "open_file_limit", c.OpenFileLimit,
		"publish_token_set", c.PublishToken != "", "publish_token_file", c.PublishTokenFile,
		"jwt_keys", c.Auth.JWTKeys.String(), "jwt_hmac_file", c.Auth.JWTHMACFile, "jwt_audience", c.Auth.JWTAudience,
		"jwt_issuer", c.Auth.JWTIssuer, "jwt_cookie", c.Auth.JWTCookie, "ticket_ttl", fmtDuration(c.Auth.TicketTTL),
		"anonymous_rooms", c.Auth.AnonymousRooms, "max_token_age", fmtDuration(c.Auth.MaxTokenAge),
		"max_anonymous_rooms", c.Auth.MaxAnonymousRooms, "max_anonymous_rooms_per_ip", c.Auth.MaxAnonymousRoomsPerIP,
		"public_host", c.PublicHosts.String(), "allow_origin", c.AllowOrigin, "admin_token_set", c.AdminToken != "", "admin_token_file", c.AdminTokenFile,
		"drain_delay", fmtDuration(c.DrainDelay), "drain_window", fmtDuration(c.DrainWindow), "drain_timeout", fmtDuration(c.DrainTimeout),
		"log_level", strings.ToLower(c.LogLevel), "log_format", strings.ToLower(c.LogFormat), "idle_loop", c.IdleLoop,
	}
}
