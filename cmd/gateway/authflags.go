package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
)

// authFlags are the access-control flags.
type authFlags struct {
	JWTKeys           stringList
	JWTHMACFile       string
	JWTAudience       string
	JWTIssuer         string
	JWTCookie         string
	TicketTTL         time.Duration
	AnonymousRooms    string
	MaxTokenAge       time.Duration
	MaxAnonymousRooms int
	// MaxAnonymousRoomsPerIP is anonymousShare of MaxAnonymousRooms unless set.
	MaxAnonymousRoomsPerIP int
}

// anonymousShare: unless --max-anonymous-rooms-per-ip is set, one client address
// may make anonymous streams hold a tenth of --max-anonymous-rooms.
const anonymousShare = 10

func (a *authFlags) register(fs *flag.FlagSet) {
	fs.Var(&a.JWTKeys, "jwt-key", "a PEM public key (RSA, ECDSA, Ed25519) or a JWKS file that verifies subscriber and publisher JWTs; repeatable or comma-separated; re-read when it changes")
	fs.StringVar(&a.JWTHMACFile, "jwt-hmac-file", "", "file holding an HS256 secret (at least 32 bytes) that verifies JWTs")
	fs.StringVar(&a.JWTAudience, "jwt-audience", "", "when set, a JWT's aud must contain it")
	fs.StringVar(&a.JWTIssuer, "jwt-issuer", "", "when set, a JWT's iss must equal it")
	fs.StringVar(&a.JWTCookie, "jwt-cookie", "", "name of a cookie carrying a subscriber's JWT (same-site apps); empty: cookies are not read")
	fs.DurationVar(&a.TicketTTL, "ticket-ttl", 30*time.Second, "how long a ticket from POST /tickets may wait to be redeemed (once)")
	fs.StringVar(&a.AnonymousRooms, "anonymous-rooms", "", "rooms readable without a credential once a JWT key is set: comma-separated names or prefixes ending in * (empty: none)")
	fs.DurationVar(&a.MaxTokenAge, "max-token-age", 24*time.Hour, "the longest a JWT may live: one without exp or iat, or with exp - iat longer, is refused; POST /admin/revoke refuses a user's or a token's credentials this long")
	fs.IntVar(&a.MaxAnonymousRooms, "max-anonymous-rooms", 10000, "rooms that streams without a credential (every stream, with no JWT key) may hold on a pod; a stream for one more gets 200, a longer retry: and an end (0: no cap)")
	fs.IntVar(&a.MaxAnonymousRoomsPerIP, "max-anonymous-rooms-per-ip", 10000/anonymousShare, "rooms that streams without a credential from one client address (as --max-streams-per-ip counts it) may hold on a pod; a stream for one more gets 200, a longer retry: and an end (unset: a tenth of --max-anonymous-rooms, rounded up; 0: no quota)")
}

// deriveQuota sets --max-anonymous-rooms-per-ip to its share of
// --max-anonymous-rooms (0, no quota, when that is 0) unless it was given.
func (a *authFlags) deriveQuota(given bool) {
	if !given {
		a.MaxAnonymousRoomsPerIP = (a.MaxAnonymousRooms + anonymousShare - 1) / anonymousShare
	}
}

// jwtEnabled reports whether any JWT key is configured.
func (a authFlags) jwtEnabled() bool { return len(a.JWTKeys) > 0 || a.JWTHMACFile != "" }

// check validates the access-control flags on their own and together.
func (a authFlags) check() error {
	if _, err := a.anonymous(); err != nil {
		return err
	}
	if !a.jwtEnabled() {
		for name, v := range map[string]string{"jwt-audience": a.JWTAudience, "jwt-issuer": a.JWTIssuer, "jwt-cookie": a.JWTCookie, "anonymous-rooms": a.AnonymousRooms} {
			if v != "" {
				return fmt.Errorf("--%s: needs --jwt-key or --jwt-hmac-file (without a key every room is open to read)", name)
			}
		}
	}
	if a.JWTCookie != "" && !validCookieName(a.JWTCookie) {
		return fmt.Errorf("--jwt-cookie %q: not a cookie name", a.JWTCookie)
	}
	if a.TicketTTL > a.MaxTokenAge {
		return fmt.Errorf("--ticket-ttl %s: longer than --max-token-age %s (a ticket issued just before a revocation could be redeemed after it lapsed)", a.TicketTTL, a.MaxTokenAge)
	}
	return nil
}

func (a authFlags) anonymous() (auth.Grants, error) {
	var list []string
	for _, p := range strings.Split(a.AnonymousRooms, ",") {
		if p = strings.TrimSpace(p); p != "" {
			list = append(list, p)
		}
	}
	g, err := auth.ParseGrants(list)
	if err != nil {
		return nil, fmt.Errorf("--anonymous-rooms: %w", err)
	}
	return g, nil
}

// validCookieName: an RFC 6265 token.
func validCookieName(s string) bool {
	if len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return s != ""
}

// publishKeys are the static publish keys: --publish-token's comma-separated list,
// or --publish-token-file's lines.
func publishKeys(c config) []string {
	var keys []string
	for _, k := range strings.FieldsFunc(c.PublishToken, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// readKeysFile reads one or more publish keys for flag ("--name"), one per line (blank
// lines and lines starting with # skipped). Errors never include the file's content.
func readKeysFile(flag, path string) (string, error) {
	b, err := readBoundedFile(flag, path)
	if err != nil {
		return "", err
	}
	var keys []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, ",") {
			return "", fmt.Errorf("%s %q: one key per line, without commas", flag, path)
		}
		keys = append(keys, line)
	}
	if len(keys) == 0 {
		return "", fmt.Errorf("%s %q: empty", flag, path)
	}
	return strings.Join(keys, ","), nil
}

// newAuthenticator builds the pod's access control over the control plane's ticket
// store and revocations.
func newAuthenticator(c config, ctl replay.Control, logger *slog.Logger) (*auth.Authenticator, error) {
	anon, err := c.Auth.anonymous()
	if err != nil {
		return nil, err
	}
	// A key file that cannot be read is named with its flag, as every configuration
	// error is; the authenticator reads and checks what is in it.
	for _, k := range c.Auth.JWTKeys {
		if _, err := os.Stat(k); err != nil {
			return nil, fmt.Errorf("--jwt-key %q: %w", k, pathErr(err))
		}
	}
	if h := c.Auth.JWTHMACFile; h != "" {
		if _, err := os.Stat(h); err != nil {
			return nil, fmt.Errorf("--jwt-hmac-file %q: %w", h, pathErr(err))
		}
	}
	tickets, revs := ctl.Tickets, ctl.Revocations
	if tickets == nil || revs == nil {
		return nil, errors.New("the log keeps no tickets or revocations")
	}
	return auth.New(auth.Config{
		KeyFiles:    c.Auth.JWTKeys,
		HMACFile:    c.Auth.JWTHMACFile,
		Audience:    c.Auth.JWTAudience,
		Issuer:      c.Auth.JWTIssuer,
		Cookie:      c.Auth.JWTCookie,
		PublishKeys: publishKeys(c),
		Anonymous:   anon,
		Tickets:     tickets,
		TicketTTL:   c.Auth.TicketTTL,
		MaxTokenAge: c.Auth.MaxTokenAge,
		Revocations: revs,
		Logger:      logger,
	})
}

// stringList is a repeatable flag; each value may also be a comma-separated list
// (the form its environment twin takes).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
