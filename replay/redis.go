package replay

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/roomcast/roomcast/replay/flight"
)

// The Redis Function library (roomcast.lua). Its name and its functions' names carry
// a version: Redis keeps function names unique across libraries, so a new version
// gets new names and loads beside the old one during a rolling upgrade.
const (
	RedisLibrary   = "roomcast_v1"
	redisFnPublish = "roomcast_v1_publish"
	redisFnSince   = "roomcast_v1_since"
	// redisFnPublishTTL publishes an event with a deadline. It joined the library
	// after publish: a pod that finds a node without it (an older pod loaded the
	// library over this one) loads the library again, as for any function a node
	// does not know, and older pods keep calling publish and since, which are
	// unchanged.
	redisFnPublishTTL = "roomcast_v1_publish_ttl"
)

//go:embed roomcast.lua
var redisLibrarySource string

// MaxIdempotencyKeyLen bounds Message.IdempotencyKey for RedisLog, in bytes.
const MaxIdempotencyKeyLen = 1024

// RedisConfig configures a RedisLog. Every zero value means "the default".
type RedisConfig struct {
	// Addrs are seed addresses ("host:port"): one standalone server or any nodes of a
	// cluster; the client finds out which. Required.
	Addrs []string
	// Username and Password authenticate every connection (AUTH); empty: none.
	// They are never logged.
	Username, Password string
	// TLS, when set, makes every connection TLS with this configuration. An empty
	// ServerName is taken from the host of the seed the client first connects
	// through, so every node must present a certificate valid for that name.
	TLS *tls.Config
	// History is the number of events kept per room (default 1000). Redis trims the
	// log approximately (whole stream nodes of 100 entries), so a room may keep up to
	// about 100 more.
	History int
	// HistoryTTL is how long a room may go without a publish before its keys expire
	// and its next event starts a new epoch (default 24h; at least 1ms).
	HistoryTTL time.Duration
	// IdempotencyTTL is how long an idempotency key is remembered (default 1h; at
	// least 1ms).
	IdempotencyTTL time.Duration
	// WaitReplicas, when positive, makes Append acknowledge an event only once WAIT
	// confirms that this many replicas of the room's shard have it. Zero does not wait.
	WaitReplicas int
	// WaitTimeout bounds that WAIT (default 500ms, or half of Timeout if that is
	// less). It must be below Timeout.
	WaitTimeout time.Duration
	// Timeout bounds each call to the log, retries included (default 2s). It is also
	// the dial timeout.
	Timeout time.Duration
	// HealthInterval is how often the log checks that its backend answers (PING,
	// bounded by Timeout), for Health (default 1s).
	HealthInterval time.Duration
	// ClientsInterval is how often the log asks every node about its own
	// subscriber connections (CLIENT LIST TYPE pubsub, bounded by Timeout), for
	// Clients (default 15s).
	ClientsInterval time.Duration
	// Logger receives the log's own warnings (default slog.Default()).
	Logger *slog.Logger

	// HotRooms are the rooms whose doorbell is partitioned (hot.go): room names, or
	// prefixes followed by "*" ("*" alone: every room). Empty: none. At most
	// MaxHotPatterns.
	HotRooms []string
	// HotPartitions is how many sub-channels a hot room's doorbell goes to (default
	// 4; 2 to MaxHotPartitions). Every pod of a fleet must use the same value.
	HotPartitions int
	// PodID names this pod: a hash of it picks the sub-channel it listens to.
	// Required with HotRooms; never used in a key.
	PodID string
	// HotCheckInterval is how often each subscribed hot room's head is compared with
	// the last doorbell heard, to catch a lost sub-channel ring (default 1s).
	HotCheckInterval time.Duration

	// clientName names every connection (redis_clients.go): set by fill.
	clientName string
}

func (c *RedisConfig) fill() error {
	if c.History == 0 {
		c.History = 1000
	}
	if c.HistoryTTL == 0 {
		c.HistoryTTL = 24 * time.Hour
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = time.Hour
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = time.Second
	}
	if c.ClientsInterval == 0 {
		c.ClientsInterval = 15 * time.Second
	}
	if c.clientName == "" {
		c.clientName = clientName(c.PodID)
	}
	if c.WaitReplicas > 0 && c.WaitTimeout == 0 {
		c.WaitTimeout = min(500*time.Millisecond, c.Timeout/2)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case len(c.Addrs) == 0:
		return errors.New("replay: redis: no address")
	case c.History < 1:
		return fmt.Errorf("replay: redis: history %d: must be at least 1", c.History)
	case c.HistoryTTL < time.Millisecond || c.IdempotencyTTL < time.Millisecond:
		return errors.New("replay: redis: history and idempotency ttl must be at least 1ms")
	case c.Timeout < 0:
		return fmt.Errorf("replay: redis: timeout %s: must be positive", c.Timeout)
	case c.HealthInterval < 0:
		return fmt.Errorf("replay: redis: health interval %s: must be positive", c.HealthInterval)
	case c.ClientsInterval < 0:
		return fmt.Errorf("replay: redis: clients interval %s: must be positive", c.ClientsInterval)
	case c.WaitReplicas < 0:
		return fmt.Errorf("replay: redis: wait replicas %d: must not be negative", c.WaitReplicas)
	case c.WaitReplicas > 0 && (c.WaitTimeout < time.Millisecond || c.WaitTimeout >= c.Timeout):
		return fmt.Errorf("replay: redis: wait timeout %s: must be at least 1ms and below the timeout %s", c.WaitTimeout, c.Timeout)
	}
	return nil
}

// RedisLog is the shared Log of a fleet: Redis (standalone or cluster) holds every
// room's sequence, bounded log and doorbell; pods hold no durable state. See
// roomcast.lua for the key layout.
//
// Append runs one Redis Function that validates, assigns the next seq, appends to the
// log, remembers the idempotency key, refreshes the room's TTL and publishes on the
// room's shard channel, atomically. Since reads the head and the entries after a
// position in one read-only function, so gap detection is exact. Concurrent
// identical Since (and Head) calls of one room share one Redis call, never one that
// started before the caller arrived. Subscribe keeps one SSUBSCRIBE per room.
//
// Errors: a backend that cannot be reached or answers CLUSTERDOWN, TRYAGAIN,
// LOADING or MASTERDOWN in time yields an error wrapping ErrUnavailable. Calls that
// surely did not run (TRYAGAIN, CLUSTERDOWN, MOVED, ASK, LOADING, MASTERDOWN, a
// failed dial) are retried with jittered backoff within the call's Timeout; an
// Append whose outcome is unknown (connection lost after sending) is retried only
// when it has an idempotency key. An Append that may have run although it failed (no
// answer in time, a lost connection, too few replicas after WAIT) fails with
// ErrOutcomeUnknown as well as ErrUnavailable. Until the log first connects, every
// call fails with ErrUnavailable; Health reports whether the backend answers.
//
// What Redis hands back is validated like client input (redis_validate.go): a
// malformed doorbell rings a zero Event, a malformed log entry is ErrGap, a
// malformed room head is ErrUnavailable.
//
// Concurrency: every method is safe for concurrent use. A room's ring is called for
// one event at a time, on rueidis's goroutines (the room's Receive goroutine for
// events, a connection's reader for zero Events), never after Unsubscribe returns.
// It must not block: a blocked ring stalls the connection every room on that node
// shares. Locks, in order: a flight.Group's mu, RedisLog.mu, a subscription's ringMu
// (held while ring runs). The group commit's mu and the slot map's mu are leaves,
// never held while taking another. None is held across Redis I/O.
type RedisLog struct {
	cfg    RedisConfig
	client rueidis.Client // set once, under mu, before connected turns true

	connected atomic.Bool
	health    atomic.Pointer[Health]

	life   context.Context // canceled by Close
	cancel context.CancelFunc

	mu     sync.Mutex // guards subs, closed and wg.Add
	subs   map[string]*redisSub
	closed bool
	wg     sync.WaitGroup // subscription loops and shared reads

	isClosed atomic.Bool

	since flight.Group[sinceResult]
	head  flight.Group[Position]
	load  flight.Group[struct{}]

	retries      atomic.Uint64
	reloads      atomic.Uint64
	resubscribes atomic.Uint64
	badMessages  atomic.Uint64
	badEntries   atomic.Uint64

	calls atomic.Pointer[CallObserver] // see ObserveCalls

	hot *redisHot // hot rooms (hot.go); nil when none

	clients clientSampler // the last sample of its own connections (redis_clients.go)

	// The control plane on this log's client (ControlOf), each store in its file:
	// tickets and revocations (control_redis.go), occupancy (occupancy_redis.go),
	// client ownership (owners_redis.go), pod notices (notices_redis.go) and pods'
	// liveness records (pods_redis.go) and their open connections (streams_redis.go).
	tickets *redisTickets
	revs    *redisRevocations
	occ     *redisOccupancy
	owners  *redisOwners
	notices *redisNotices
	pods    *redisPods
	streams *redisStreams

	group groupCommit // Appends waiting for, or in, a flush (redis_group.go)
	slots slotMap     // cluster slot owners, for flushes that WAIT

	badMessageLog atomic.Int64 // when a bad doorbell was last logged, Unix ns
	badEntryLog   atomic.Int64 // when a bad log entry was last logged, Unix ns
	connectLog    atomic.Int64 // when a refused library was last logged, Unix ns
}

var _ Log = (*RedisLog)(nil)

// RedisStats counts what a RedisLog and the stores of its control plane did since
// it started.
type RedisStats struct {
	// Subscriptions is the number of rooms subscribed now.
	Subscriptions int
	// Resubscribes counts subscriptions confirmed again after a failover, slot move
	// or lost connection (each rang a zero Event).
	Resubscribes uint64
	// Retries counts calls repeated after an error that allows it.
	Retries uint64
	// Reloads counts loads of the function library after a node did not know it.
	Reloads uint64
	// BadMessages counts doorbell messages that could not be decoded or failed
	// validation (each rang a zero Event instead).
	BadMessages uint64
	// BadEntries counts log reads that met an entry failing validation (each was
	// reported as lost history, ErrGap) or a malformed head (each failed, wrapping
	// ErrUnavailable).
	BadEntries uint64
	// BadRevocations counts revocations read from Redis (set members and notices)
	// and ticket values that failed validation; each was skipped.
	BadRevocations uint64
	// HotRings counts hot-room sub-channel rings sent, HotRingErrors those that
	// failed (readers repair from the log), HotCheckRepairs the zero rings the
	// periodic hot-room check rang because a head was ahead of the last doorbell.
	HotRings, HotRingErrors, HotCheckRepairs uint64
	// GroupFlushes counts the round trips (DoMulti calls) that carried single
	// Appends, and GroupAppends the Appends they carried: concurrent Appends share
	// a flush, so GroupAppends/GroupFlushes is the mean group size.
	GroupFlushes, GroupAppends uint64
	// BadOwners counts client ownership entries, pod notices and pods' liveness
	// records read from Redis that failed validation; each was ignored.
	BadOwners uint64
}

// NewRedisLog connects to Redis and loads the function library on every primary.
// ctx bounds this first attempt; connecting is bounded by cfg.Timeout per address.
//
// A backend that cannot be reached now is no error: the log starts all the same,
// answers every call with an error wrapping ErrUnavailable, and keeps connecting in
// the background (jittered backoff, until Close) until it is connected and the
// library is loaded. Only a bad configuration, or a server that refuses the library
// (an error answer, not an unreachable node), fails.
func NewRedisLog(ctx context.Context, cfg RedisConfig) (*RedisLog, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	hot, err := newRedisHot(&cfg)
	if err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	l := &RedisLog{cfg: cfg, life: life, cancel: cancel, subs: make(map[string]*redisSub), hot: hot}
	l.tickets, l.revs, l.occ = &redisTickets{l: l}, &redisRevocations{l: l}, &redisOccupancy{l: l}
	l.owners, l.notices, l.pods = &redisOwners{l: l}, &redisNotices{l: l}, &redisPods{l: l}
	l.streams = &redisStreams{l: l}
	l.health.Store(&Health{Kind: "redis", ChangedAt: time.Now()})
	if err := l.connect(ctx); err != nil {
		if !errors.Is(err, ErrUnavailable) {
			cancel()
			return nil, err
		}
		cfg.Logger.Warn("redis backend unreachable at start-up: connecting in the background", "addrs", cfg.Addrs, "err", err)
	}
	l.wg.Add(1)
	go l.monitor()
	if l.connected.Load() {
		l.sample()
	}
	l.spawn(l.sampleClients)
	l.startHot()
	return l, nil
}

// connect makes a client and loads the library with it; only then does the log use
// it. It fails wrapping ErrUnavailable when no node could be reached.
func (l *RedisLog) connect(ctx context.Context) error {
	client, err := connectRedis(ctx, l.cfg)
	if err != nil {
		return fmt.Errorf("replay: redis connect %v: %w: %w", l.cfg.Addrs, ErrUnavailable, err)
	}
	lctx, lcancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer lcancel()
	if err := loadLibrary(lctx, client, l.cfg.Logger); err != nil {
		client.Close()
		return fmt.Errorf("replay: redis load library: %w", l.mapErr(ctx, err))
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		client.Close()
		return ErrClosed
	}
	l.client = client
	l.mu.Unlock()
	l.connected.Store(true)
	l.setUp(true, nil)
	l.spawn(l.checkOpen)
	return nil
}

// usable fails, wrapping ErrUnavailable, until the log is connected. After it
// returns nil, l.client is set for good.
func (l *RedisLog) usable() error {
	if l.connected.Load() {
		return nil
	}
	return fmt.Errorf("%w: not connected to %v yet", ErrUnavailable, l.cfg.Addrs)
}

// Link liveness. rueidis PINGs a connection that received nothing for
// connKeepAlive (also the TCP keepalive interval) and drops it, failing everything
// waiting on it, when that PING or any reply is not answered within
// connReadTimeout(Timeout): twice the bound of one call, so a call that merely
// times out does not take the connection with it. A subscription on the dropped
// connection ends, and the room's loop subscribes again on a new one and repairs
// from the log. So a link that goes silent without a FIN (a partition, a dead NAT
// entry, a blackholing proxy) is found within 2*connKeepAlive +
// connReadTimeout(Timeout): 6s with the default 2s Timeout. rueidis's defaults
// derived from a 30s keepalive took up to 5.5 minutes.
const connKeepAlive = time.Second

func connReadTimeout(timeout time.Duration) time.Duration {
	return max(2*timeout, time.Second)
}

// DetectionBound is how long a RedisLog whose RedisConfig.Timeout is timeout (0:
// the default) takes at most to drop a connection to Redis that went silent (no
// byte, no FIN): its next PING after connKeepAlive of silence, unanswered for
// connReadTimeout.
func DetectionBound(timeout time.Duration) time.Duration {
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	return 2*connKeepAlive + connReadTimeout(timeout)
}

// connectRedis makes a client from the first seed that answers, trying them in a
// random order. One seed at a time: given several, rueidis dials them all at once,
// keeps the first to answer and lets the others race into its connection table
// (each loser is closed by a goroutine 5s later). The client learns every node of a
// cluster from the one seed.
func connectRedis(ctx context.Context, cfg RedisConfig) (rueidis.Client, error) {
	seeds := slices.Clone(cfg.Addrs)
	rand.Shuffle(len(seeds), func(i, j int) { seeds[i], seeds[j] = seeds[j], seeds[i] })
	var errs []error
	for _, addr := range seeds {
		if err := ctx.Err(); err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		client, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{addr},
			Username:    cfg.Username,
			Password:    cfg.Password,
			ClientName:  cfg.clientName,
			TLSConfig:   seedTLS(cfg.TLS, addr),
			Dialer:      net.Dialer{Timeout: cfg.Timeout, KeepAlive: connKeepAlive},
			// A connection that went silent is found by rueidis's own PING (see
			// connKeepAlive), not by TCP keepalive: a proxy, a NAT or a paused
			// peer's kernel may keep answering that while no byte of Redis's gets
			// through.
			ConnWriteTimeout: connReadTimeout(cfg.Timeout),
			DisableCache:     true,
			// Retries are ours: only a call that surely did not run, or that is safe
			// to repeat, is sent again, and always within the call's Timeout.
			DisableRetry: true,
			// No CLIENT SETINFO (Redis 7.2+): one command fewer for the ACL to grant.
			ClientSetInfo: rueidis.DisableClientSetInfo,
		})
		if err == nil {
			return client, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return nil, errors.Join(errs...)
}

// seedTLS is c with the seed's host as ServerName when c names none; nil without TLS.
func seedTLS(c *tls.Config, addr string) *tls.Config {
	if c == nil || c.ServerName != "" {
		return c
	}
	c = c.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = host
	}
	return c
}

// Stats reports the log's counters.
func (l *RedisLog) Stats() RedisStats {
	l.mu.Lock()
	n := len(l.subs)
	l.mu.Unlock()
	st := RedisStats{
		Subscriptions: n,
		Resubscribes:  l.resubscribes.Load(),
		Retries:       l.retries.Load(),
		Reloads:       l.reloads.Load(),
		BadMessages:   l.badMessages.Load(),
		BadEntries:    l.badEntries.Load(),

		BadRevocations: l.revs.bad.Load(),

		GroupFlushes: l.group.flushes.Load(),
		GroupAppends: l.group.events.Load(),

		BadOwners: l.owners.bad.Load(),
	}
	l.hotStats(&st)
	return st
}

// Key and channel names. room must have passed ValidRoom: a "{" or "}" in it would
// move the keys to another hash slot.
func redisSeqKey(room string) string       { return "room:{" + room + "}:seq" }
func redisLogKey(room string) string       { return "room:{" + room + "}:log" }
func redisChannel(room string) string      { return "room:{" + room + "}" }
func redisIdemKey(room, key string) string { return "room:{" + room + "}:idem:" + key }

// spawn runs fn on a goroutine that Close waits for; it reports false after Close.
func (l *RedisLog) spawn(fn func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
	return true
}

// callCtx bounds one call by the configured Timeout.
func (l *RedisLog) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.cfg.Timeout)
}

func validMessage(room string, m Message) bool {
	return ValidRoom(room) && (m.Type == "" || ValidType(m.Type)) && len(m.Body) > 0 &&
		len(m.IdempotencyKey) <= MaxIdempotencyKeyLen && m.validTTL()
}

// Append implements Log.
func (l *RedisLog) Append(ctx context.Context, room string, m Message) (Event, error) {
	if l.isClosed.Load() {
		return Event{}, ErrClosed
	}
	if !validMessage(room, m) {
		return Event{}, fmt.Errorf("replay: append %q: %w", room, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return Event{}, fmt.Errorf("replay: append %q: %w", room, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	ev, err := l.commit(cctx, room, m)
	if err != nil {
		return Event{}, fmt.Errorf("replay: append %q: %w", room, l.mapErr(ctx, err))
	}
	l.ringHot(cctx, ev)
	return ev, nil
}

// append publishes one validated message, retrying what may be retried.
func (l *RedisLog) append(ctx context.Context, room string, m Message) (Event, error) {
	var ev Event
	ran := false
	err := l.retry(ctx, m.IdempotencyKey != "", func(ctx context.Context) error {
		var err error
		if l.cfg.WaitReplicas > 0 {
			ev, err = l.publishAndWait(ctx, room, m)
		} else {
			ev, err = decodePublish(l.do(ctx, OpPublish, l.client, l.publishCmd(l.client.B(), room, m)), room, m)
		}
		ran = ran || mayHaveRun(err)
		return err
	})
	return ev, unknownIf(ran, err)
}

// mayHaveRun reports whether a publish that failed with err may have run all the
// same: it was handed to a connection and no answer came back (a deadline, a lost
// connection), or WAIT saw too few replicas after it ran.
func mayHaveRun(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		return true
	}
	switch classify(err) {
	case failUnknown, failDeadline:
		return true
	}
	return false
}

// unknownIf marks err as ErrOutcomeUnknown when any attempt may have run: a later
// attempt that surely did not run does not undo an earlier one that may have.
func unknownIf(ran bool, err error) error {
	if err == nil || !ran || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

func (l *RedisLog) publishCmd(b rueidis.Builder, room string, m Message) rueidis.Completed {
	args := []string{
		newEpoch(),
		strconv.Itoa(l.cfg.History),
		strconv.FormatInt(l.cfg.HistoryTTL.Milliseconds(), 10),
		strconv.FormatInt(l.cfg.IdempotencyTTL.Milliseconds(), 10),
		m.Type,
		string(m.Body),
	}
	fn := redisFnPublish
	if ttl := m.ttlMillis(); ttl > 0 {
		fn, args = redisFnPublishTTL, append(args, strconv.FormatInt(ttl, 10))
	}
	if m.IdempotencyKey == "" {
		return b.Fcall().Function(fn).Numkeys(2).
			Key(redisSeqKey(room), redisLogKey(room)).Arg(args...).Build()
	}
	return b.Fcall().Function(fn).Numkeys(3).
		Key(redisSeqKey(room), redisLogKey(room), redisIdemKey(room, m.IdempotencyKey)).Arg(args...).Build()
}

// errNotReplicated: WAIT saw fewer replicas than asked for in time. The event is
// stored on the primary but might not survive its failover.
var errNotReplicated = errors.New("fewer replicas acknowledged than required")

// publishAndWait publishes and runs WAIT on the same connection: WAIT counts the
// replicas that acknowledged the connection's own last write. A dedicated connection
// keeps WAIT from blocking the shared pipeline; in a cluster it is pinned to the
// room's slot, so it reaches the node that ran the publish.
func (l *RedisLog) publishAndWait(ctx context.Context, room string, m Message) (Event, error) {
	var ev Event
	err := l.client.Dedicated(func(c rueidis.DedicatedClient) error {
		start := time.Now()
		res := c.DoMulti(ctx, l.publishCmd(c.B(), room, m), l.waitCmd(c.B()))
		l.observe(OpPublish, start, firstErr(res))
		var err error
		if ev, err = decodePublish(res[0], room, m); err != nil {
			return err
		}
		// The event ran: a WAIT that fails or falls short leaves its fate unknown.
		return l.waited(res[1])
	})
	return ev, err
}

// decodePublish reads the publish function's answer: {epoch, seq, ts, duplicate}.
func decodePublish(res rueidis.RedisResult, room string, m Message) (Event, error) {
	arr, err := res.ToArray()
	if err != nil {
		return Event{}, err
	}
	if len(arr) != 4 {
		return Event{}, fmt.Errorf("publish answered %d values, want 4", len(arr))
	}
	epoch, err1 := arr[0].ToString()
	seq, err2 := arr[1].AsInt64()
	ts, err3 := arr[2].AsInt64()
	dup, err4 := arr[3].AsInt64()
	if err := errors.Join(err1, err2, err3, err4); err != nil || seq < 1 {
		return Event{}, fmt.Errorf("publish answered %v: %v", arr, err)
	}
	if !validEpoch(epoch) || seq > MaxSeq || ts <= 0 {
		// It ran over a room head someone else wrote: stored, but under no position
		// a reader could use.
		return Event{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, errBadHead)
	}
	ev := Event{Room: room, Epoch: epoch, Seq: uint64(seq), TS: ts}
	if dup == 0 {
		ev.Type, ev.Body = m.Type, m.Body
		if ttl := m.ttlMillis(); ttl > 0 {
			// The function reckons the deadline from the same ts.
			ev.Expires = ts + ttl
		}
	}
	return ev, nil
}

// AppendBatch appends msgs[i] to rooms[i] for every i, pipelined: one round trip per
// node, however many rooms, with WaitReplicas set the WAIT included (see
// redis_group.go). Results are in order; each item fails alone. Items that hit a
// retryable error are retried one by one, so seqs within one room follow the batch
// order except after such a retry. A length mismatch fails every item with
// ErrInvalid.
func (l *RedisLog) AppendBatch(ctx context.Context, rooms []string, msgs []Message) ([]Event, []error) {
	n := max(len(rooms), len(msgs))
	evs, errs := make([]Event, n), make([]error, n)
	fill := func(err error) ([]Event, []error) {
		for i := range errs {
			errs[i] = err
		}
		return evs, errs
	}
	switch {
	case len(rooms) != len(msgs):
		return fill(fmt.Errorf("replay: append batch: %d rooms for %d messages: %w", len(rooms), len(msgs), ErrInvalid))
	case l.isClosed.Load():
		return fill(ErrClosed)
	case n == 0:
		return evs, errs
	case l.usable() != nil:
		return fill(fmt.Errorf("replay: append batch: %w", l.usable()))
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	defer func() { l.ringHot(cctx, evs...) }()
	var ps []*pendingAppend
	var idx []int
	for i := range msgs {
		if !validMessage(rooms[i], msgs[i]) {
			errs[i] = fmt.Errorf("replay: append %q: %w", rooms[i], ErrInvalid)
			continue
		}
		ps = append(ps, &pendingAppend{room: rooms[i], msg: msgs[i]})
		idx = append(idx, i)
	}
	if len(ps) == 0 {
		return evs, errs
	}
	l.flush(cctx, OpBatch, ps)
	for j, p := range ps {
		i := idx[j]
		ev, err := p.ev, p.err
		ran := mayHaveRun(err)
		if err != nil && retryable(err, msgs[i].IdempotencyKey != "") {
			l.retries.Add(1)
			ev, err = l.append(cctx, rooms[i], msgs[i])
		}
		if err = unknownIf(ran, err); err != nil {
			errs[i] = fmt.Errorf("replay: append %q: %w", rooms[i], l.mapErr(ctx, err))
			continue
		}
		evs[i] = ev
	}
	return evs, errs
}

// Ping checks that the backend answers, within Timeout.
func (l *RedisLog) Ping(ctx context.Context) error {
	if l.isClosed.Load() {
		return ErrClosed
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: ping: %w", err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	if err := l.do(cctx, OpHealth, l.client, l.client.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("replay: ping: %w", l.mapErr(ctx, err))
	}
	return nil
}

// Close stops every subscription and shared read, waits for them, and closes the
// client. It is safe to call more than once.
func (l *RedisLog) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.isClosed.Store(true)
	client := l.client
	l.mu.Unlock()
	l.cancel()
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	if client != nil {
		defer client.Close()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// What is left ends within Timeout: every call it makes is bounded by it.
		return fmt.Errorf("replay: close: %w", ctx.Err())
	}
}
