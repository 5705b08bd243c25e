package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// AnonymousClients is the pattern of the WebSocket client ids a connection without
// a subject may claim once a JWT key is configured: its own namespace. Without a JWT
// key every connection is anonymous and may claim any id.
const AnonymousClients Pattern = "anon:*"

// Defaults for the zero values of Config.
const (
	DefaultLeeway      = 5 * time.Second
	DefaultTicketTTL   = 30 * time.Second
	DefaultReloadEvery = 2 * time.Second
	DefaultMaxTokenAge = 24 * time.Hour
)

// Config configures an Authenticator. Only cmd/gateway reads flags; it fills this.
type Config struct {
	// KeyFiles (--jwt-key, repeatable) are PEM public keys (RSA of at least 2048 bits,
	// ECDSA P-256/384/521, Ed25519; PKIX "PUBLIC KEY", "RSA PUBLIC KEY" or a
	// "CERTIFICATE") or JWKS documents (or one JWK) whose keys are picked by kid.
	KeyFiles []string
	// HMACFile (--jwt-hmac-file) holds an HS256 secret, trimmed of surrounding white
	// space, at least 32 bytes. Empty: HS256 tokens are refused.
	HMACFile string
	// Audience (--jwt-audience): when set, a token's aud must contain it.
	Audience string
	// Issuer (--jwt-issuer): when set, a token's iss must equal it.
	Issuer string
	// Leeway is the clock skew allowed on exp, nbf and iat. Zero: 5s.
	Leeway time.Duration
	// Cookie (--jwt-cookie) names the cookie carrying a subscriber's JWT. Empty:
	// cookies are not read.
	Cookie string
	// PublishKeys are static publish keys, already read from flags or files; each is
	// trimmed of surrounding white space and must not be empty.
	PublishKeys []string
	// Anonymous (--anonymous-rooms) is what a request without a credential may read
	// once a JWT key is configured. Every credential may read these rooms too.
	Anonymous Grants
	// Tickets stores single-use tickets. Nil: ?ticket= is refused and IssueTicket
	// returns ErrNoTickets.
	Tickets replay.Tickets
	// TicketTTL is how long an issued ticket may be redeemed, at most MaxTokenAge.
	// Zero: 30s.
	TicketTTL time.Duration
	// MaxTokenAge (--max-token-age) is the longest a JWT may live: a token must
	// carry exp and iat, with exp - iat at most this. The gateway keeps a revocation
	// as long (plus the leeway), so that no token it refuses outlives it. Zero: 24h.
	MaxTokenAge time.Duration
	// Revocations shares revocations with every pod. Nil: revocation is pod-local.
	Revocations replay.Revocations
	// ReloadEvery is how often key files are checked for changes. Zero: 2s.
	ReloadEvery time.Duration
	// Now is the clock that judges credentials. Nil: time.Now.
	Now func() time.Time
	// Logger receives warnings about key files and revocations. Nil: discarded.
	Logger *slog.Logger
}

// Authenticator turns requests into Principals. It is safe for concurrent use.
type Authenticator struct {
	cfg         Config
	now         func() time.Time
	log         *slog.Logger
	staticKeys  [][sha256.Size]byte // digests of Config.PublishKeys
	anonymous   Grants              // Config.Anonymous, or "*" when no JWT key is configured
	anonClients Grants              // the client ids of anonymous connections: AnonymousClients, or nil (any) when no JWT key is configured

	keys     *keyring
	verified *verifiedCache
	revoke   *revocations

	// notifyMu serialises calls to the OnRevoke watchers.
	notifyMu sync.Mutex
	watchers []func(replay.Revocation)

	startOnce sync.Once
	closeOnce sync.Once
	closed    atomic.Bool
	stopKeys  context.CancelFunc // ends the key watch
	done      chan struct{}      // closed when the key watch has returned

	mu        sync.Mutex         // guards stopWatch
	stopWatch context.CancelFunc // ends the revocation watch; nil before Start
}

// New validates cfg and reads every key file now; a bad file is an error naming the
// file (never its content). It starts watching the key files for changes.
func New(cfg Config) (*Authenticator, error) {
	switch {
	case cfg.Leeway < 0:
		return nil, fmt.Errorf("auth: leeway %s is negative", cfg.Leeway)
	case cfg.TicketTTL < 0:
		return nil, fmt.Errorf("auth: ticket TTL %s is negative", cfg.TicketTTL)
	case cfg.ReloadEvery < 0:
		return nil, fmt.Errorf("auth: reload interval %s is negative", cfg.ReloadEvery)
	case cfg.MaxTokenAge < 0:
		return nil, fmt.Errorf("auth: max token age %s is negative", cfg.MaxTokenAge)
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	if cfg.TicketTTL == 0 {
		cfg.TicketTTL = DefaultTicketTTL
	}
	if cfg.ReloadEvery == 0 {
		cfg.ReloadEvery = DefaultReloadEvery
	}
	if cfg.MaxTokenAge == 0 {
		cfg.MaxTokenAge = DefaultMaxTokenAge
	}
	if cfg.TicketTTL > cfg.MaxTokenAge {
		// A ticket issued just before a revocation could be redeemed after it lapsed.
		return nil, fmt.Errorf("auth: ticket TTL %s is longer than the max token age %s", cfg.TicketTTL, cfg.MaxTokenAge)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Anonymous) > maxGrants {
		return nil, fmt.Errorf("auth: anonymous rooms: %d patterns, at most %d", len(cfg.Anonymous), maxGrants)
	}
	for _, p := range cfg.Anonymous {
		if _, err := ParsePattern(string(p)); err != nil {
			return nil, fmt.Errorf("auth: anonymous rooms: %w", err)
		}
	}
	a := &Authenticator{
		cfg:      cfg,
		now:      cfg.Now,
		log:      cfg.Logger,
		revoke:   newRevocations(maxRevocations),
		verified: newVerifiedCache(),
		done:     make(chan struct{}),
	}
	for i, k := range cfg.PublishKeys {
		k = strings.TrimSpace(k)
		if k == "" {
			return nil, fmt.Errorf("auth: publish key %d is empty", i+1)
		}
		a.staticKeys = append(a.staticKeys, sha256.Sum256([]byte(k)))
	}
	kr, err := newKeyring(cfg.KeyFiles, cfg.HMACFile, cfg.Logger)
	if err != nil {
		return nil, err
	}
	a.keys = kr
	a.anonymous = cfg.Anonymous
	a.anonClients = Grants{AnonymousClients}
	if !a.Enabled() {
		a.anonymous, a.anonClients = all, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopKeys = cancel
	go func() {
		defer close(a.done)
		kr.watch(ctx, cfg.ReloadEvery)
	}()
	return a, nil
}

// Close stops watching the key files and the revocations. It is safe to call more
// than once.
func (a *Authenticator) Close() {
	a.closeOnce.Do(func() {
		a.closed.Store(true)
		a.mu.Lock()
		if a.stopWatch != nil {
			a.stopWatch()
		}
		a.mu.Unlock()
		a.stopKeys()
		<-a.done
	})
}

// Enabled reports whether a JWT key (KeyFiles or HMACFile) is configured.
func (a *Authenticator) Enabled() bool { return a.keys.configured() }

// Start begins watching Config.Revocations until Close; call it once after New (later
// calls do nothing). Without Config.Revocations it does nothing.
func (a *Authenticator) Start() {
	a.startOnce.Do(func() {
		if a.cfg.Revocations == nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.closed.Load() {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		a.stopWatch = cancel
		a.cfg.Revocations.WatchRevocations(ctx, a.learn)
	})
}

// anyKey reports whether any credential (a JWT key or a static publish key) is configured.
func (a *Authenticator) anyKey() bool { return a.Enabled() || len(a.staticKeys) > 0 }
