package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

const (
	// maxToken bounds a JWT; a longer one is refused before it is parsed.
	maxToken = 8 << 10
	// maxID bounds a sub or jti, as replay.Revocation bounds its value.
	maxID = 256
)

// tokenClaims are the claims read from a JWT. The roomcast claim is parsed after the
// signature is verified, so that a malformed one gets a precise reason.
type tokenClaims struct {
	jwt.RegisteredClaims
	Roomcast json.RawMessage `json:"roomcast,omitempty"`
}

// grantClaim is the roomcast claim: {"subscribe":[...],"publish":[...],"clients":[...]}.
// Clients is nil when absent (or null): any client id.
type grantClaim struct {
	Subscribe []string  `json:"subscribe"`
	Publish   []string  `json:"publish"`
	Clients   *[]string `json:"clients"`
}

// tokenHeader is the part of a JOSE header read before verification.
type tokenHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

func invalid(reason string) error { return fmt.Errorf("auth: %s: %w", reason, ErrInvalid) }

// verify checks a compact JWT and returns its Principal with source src.
func (a *Authenticator) verify(tok string, src Source) (Principal, error) {
	if len(tok) > maxToken {
		return Principal{}, invalid("token larger than 8 KiB")
	}
	h, err := parseHeader(tok)
	if err != nil {
		return Principal{}, err
	}
	if h.Alg == "" || strings.EqualFold(h.Alg, "none") {
		return Principal{}, invalid(fmt.Sprintf("token algorithm %.16q not accepted", h.Alg))
	}
	set := a.keys.current()
	now := a.now()
	if p, ok := a.verified.get(tok, set, now); ok {
		if a.Revoked(p) {
			return Principal{}, ErrRevoked
		}
		p.Source = src
		return p, nil
	}
	if h.Kid != "" && len(set.byKid[h.Kid]) == 0 {
		// Perhaps the issuer rotated its keys: look again, at most once a second.
		a.keys.forceReload()
		set = a.keys.current()
	}
	cands := set.candidates(h.Kid, h.Alg)
	if len(cands) == 0 {
		if !set.supports(h.Alg) {
			return Principal{}, invalid(fmt.Sprintf("token algorithm %.16q not accepted", h.Alg))
		}
		return Principal{}, invalid("no key matches the token's kid and algorithm")
	}
	keys := jwt.VerificationKeySet{Keys: make([]jwt.VerificationKey, len(cands))}
	for i, k := range cands {
		keys.Keys[i] = k.key
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{h.Alg}),
		jwt.WithLeeway(a.cfg.Leeway),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(a.now),
	}
	if a.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(a.cfg.Audience))
	}
	if a.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(a.cfg.Issuer))
	}
	var c tokenClaims
	if _, err := jwt.NewParser(opts...).ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return keys, nil }); err != nil {
		return Principal{}, invalid(jwtReason(err))
	}
	if err := a.checkLifetime(&c); err != nil {
		return Principal{}, err
	}
	p, err := a.principal(&c, src)
	if err != nil {
		return Principal{}, err
	}
	if a.Revoked(p) {
		return Principal{}, ErrRevoked
	}
	a.verified.put(tok, p, set, now, a.cfg.Leeway)
	return p, nil
}

// checkLifetime refuses a token that does not say when it was issued and when it
// expires, or that may live longer than Config.MaxTokenAge. A revocation is kept for
// MaxTokenAge plus the leeway: a token it refuses was issued at or before it, so has
// expired (leeway included) by the time it lapses, and never comes back.
func (a *Authenticator) checkLifetime(c *tokenClaims) error {
	switch {
	case c.ExpiresAt == nil:
		return invalid("token has no exp: every token must expire")
	case c.IssuedAt == nil:
		return invalid("token has no iat: every token must say when it was issued")
	case c.ExpiresAt.Sub(c.IssuedAt.Time) > a.cfg.MaxTokenAge:
		return invalid(fmt.Sprintf("token lives longer (exp - iat) than the max token age %s", a.cfg.MaxTokenAge))
	}
	return nil
}

// parseHeader reads alg and kid from a compact JWT's header, after checking its form.
func parseHeader(tok string) (tokenHeader, error) {
	var h tokenHeader
	if strings.Count(tok, ".") != 2 {
		return h, invalid("malformed token: not three dot-separated parts")
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; !isBase64URL(c) && c != '.' {
			return h, invalid("malformed token: a character outside base64url")
		}
	}
	seg, _, _ := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return h, invalid("malformed token header")
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, invalid("malformed token header")
	}
	return h, nil
}

// jwtReason is a client-safe reason for an error of the jwt parser.
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad token signature"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet (nbf)"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token issued in the future (iat)"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "token audience does not match"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "token issuer does not match"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && strings.Contains(err.Error(), "aud"):
		return "token audience missing"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && strings.Contains(err.Error(), "iss"):
		return "token issuer missing"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "token lacks a required claim"
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		return "invalid token claims"
	}
	return "token not verifiable"
}

// principal builds the Principal of verified claims.
func (a *Authenticator) principal(c *tokenClaims, src Source) (Principal, error) {
	if len(c.Subject) > maxID || !utf8.ValidString(c.Subject) {
		return Principal{}, invalid("token sub longer than 256 bytes or not UTF-8")
	}
	if len(c.ID) > maxID || !utf8.ValidString(c.ID) {
		return Principal{}, invalid("token jti longer than 256 bytes or not UTF-8")
	}
	var g grantClaim
	if len(c.Roomcast) > 0 && string(c.Roomcast) != "null" {
		if err := json.Unmarshal(c.Roomcast, &g); err != nil {
			return Principal{}, invalid(`roomcast claim is not {"subscribe":[...],"publish":[...],"clients":[...]}`)
		}
	}
	sub, err := ParseGrants(g.Subscribe)
	if err != nil {
		return Principal{}, fmt.Errorf("auth: roomcast claim subscribe: %w", err)
	}
	pub, err := ParseGrants(g.Publish)
	if err != nil {
		return Principal{}, fmt.Errorf("auth: roomcast claim publish: %w", err)
	}
	var clients Grants
	if g.Clients != nil {
		if clients, err = ParseClientGrants(*g.Clients); err != nil {
			return Principal{}, fmt.Errorf("auth: roomcast claim clients: %w", err)
		}
	}
	if c.Subject == "" {
		// No subject to bind client ids to: the anonymous rule.
		clients = a.anonClients
	}
	p := Principal{
		Sub:       c.Subject,
		JTI:       c.ID,
		Subscribe: append(sub, a.cfg.Anonymous...),
		Publish:   pub,
		Clients:   clients,
		Source:    src,
	}
	if c.IssuedAt != nil {
		p.IssuedAt = c.IssuedAt.Time
	}
	if c.ExpiresAt != nil {
		p.Expires = c.ExpiresAt.Time
	}
	return p, nil
}

func isBase64URL(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
