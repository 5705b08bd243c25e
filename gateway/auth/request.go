package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

const (
	// maxAuthorization bounds the Authorization header: a maximal token and its scheme.
	maxAuthorization = maxToken + 64
	// maxCookieHeader bounds the Cookie header(s) read for the JWT cookie.
	maxCookieHeader = 16 << 10
	// ticketLen is the length of a ticket: 256 bits in base64url without padding.
	ticketLen = 43
)

// Subscriber authenticates a stream request. Sources in this order, the first present
// wins: Authorization: Bearer <jwt>; the cookie Config.Cookie; the query parameter
// ticket=, which is redeemed (it works once). A present but bad credential is
// ErrInvalid: it never falls through to the next source or to anonymous. An empty
// Authorization header or cookie counts as absent. With none: when !Enabled(), an
// anonymous Principal that may subscribe to every room; when Enabled(), an anonymous
// Principal with Subscribe = Config.Anonymous (it may be empty; the caller answers
// 401 for a room it does not allow).
//
// Without a JWT key (!Enabled()) the Authorization header and the cookie are not read,
// since nothing could verify them; a ticket still is.
func (a *Authenticator) Subscriber(ctx context.Context, r *http.Request) (Principal, error) {
	return a.subscriber(ctx, r, ticketRedeem)
}

// CheckSubscriber is Subscriber without side effects, for a HEAD of a stream: a
// ticket is checked as a redemption would check it (unknown, used, expired, revoked)
// but not redeemed, so the stream that follows can still redeem it.
func (a *Authenticator) CheckSubscriber(ctx context.Context, r *http.Request) (Principal, error) {
	return a.subscriber(ctx, r, ticketPeek)
}

// Token authenticates a request by its JWT alone: Authorization: Bearer, then the
// cookie, as Subscriber reads them. A ?ticket= is never read, let alone redeemed: a
// ticket is no credential for minting tickets. ErrNoCredential when there is no
// token (or no JWT key is configured).
func (a *Authenticator) Token(r *http.Request) (Principal, error) {
	p, err := a.subscriber(context.Background(), r, ticketIgnored)
	if err == nil && p.Source == SourceAnonymous {
		return Principal{}, errNoToken
	}
	return p, err
}

var errNoToken = fmt.Errorf("auth: a token is needed: %w", ErrNoCredential)

// ticketUse is what subscriber does with a ?ticket=.
type ticketUse int

const (
	ticketRedeem  ticketUse = iota // take it from the store: it works once
	ticketPeek                     // check it and leave it in the store
	ticketIgnored                  // do not read it
)

func (a *Authenticator) subscriber(ctx context.Context, r *http.Request, use ticketUse) (Principal, error) {
	if a.Enabled() {
		tok, ok, err := bearer(r)
		if err != nil {
			return Principal{}, err
		}
		if ok {
			return a.verify(tok, SourceBearer)
		}
		if a.cfg.Cookie != "" {
			tok, ok, err := a.cookie(r)
			if err != nil {
				return Principal{}, err
			}
			if ok {
				return a.verify(tok, SourceCookie)
			}
		}
	}
	if use != ticketIgnored {
		ticket, ok, err := ticketParam(r)
		if err != nil {
			return Principal{}, err
		}
		if ok {
			return a.redeem(ctx, ticket, use == ticketPeek)
		}
	}
	return Principal{Subscribe: a.anonymous, Clients: a.anonClients, Source: SourceAnonymous}, nil
}

// Publisher authenticates a publish: Authorization: Bearer carrying either a static
// publish key (compared in constant time on SHA-256 digests, against every key) ->
// Source static, Publish "*"; or a JWT -> its publish grants. No Authorization header:
// ErrNoCredential when any key (JWT or static) is configured; when none is, an
// anonymous Principal with Publish "*" (the caller still requires a loopback peer),
// and the Authorization header is not read. A static key's Principal names the key
// by its position (Key).
func (a *Authenticator) Publisher(r *http.Request) (Principal, error) {
	if !a.anyKey() {
		return Principal{Publish: all, Source: SourceAnonymous}, nil
	}
	tok, ok, err := bearer(r)
	if err != nil {
		return Principal{}, err
	}
	if !ok {
		return Principal{}, errNoPublishCredential
	}
	if n := a.staticKey(tok); n > 0 {
		return Principal{Publish: all, Key: n, Source: SourceStatic}, nil
	}
	if a.Enabled() && strings.Count(tok, ".") == 2 {
		return a.verify(tok, SourceBearer)
	}
	return Principal{}, invalid("unknown publish key")
}

var errNoPublishCredential = fmt.Errorf("auth: publishing needs a bearer credential: %w", ErrNoCredential)

// staticKey returns the position (from 1) of tok among the static publish keys, 0
// when it is none of them. Every key is compared, on digests, so that neither which
// key matched nor a key's length or content leaks through timing.
func (a *Authenticator) staticKey(tok string) int {
	sum := sha256.Sum256([]byte(tok))
	n := 0
	for i, k := range a.staticKeys {
		n = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(sum[:], k[:]), i+1, n)
	}
	return n
}

// bearer returns the token of an Authorization: Bearer header. ok is false when there
// is no header or it is empty.
func bearer(r *http.Request) (tok string, ok bool, err error) {
	vals := r.Header.Values("Authorization")
	switch {
	case len(vals) == 0:
		return "", false, nil
	case len(vals) > 1:
		return "", false, invalid("more than one Authorization header")
	}
	v := strings.TrimSpace(vals[0])
	if v == "" {
		return "", false, nil
	}
	if len(v) > maxAuthorization {
		return "", false, invalid("Authorization header larger than 8 KiB")
	}
	scheme, rest, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, invalid("Authorization is not a Bearer credential")
	}
	tok = strings.TrimSpace(rest)
	if tok == "" {
		return "", false, invalid("empty Bearer credential")
	}
	return tok, true, nil
}

// cookie returns the value of the cookie Config.Cookie; ok is false when there is none
// or it is empty.
func (a *Authenticator) cookie(r *http.Request) (tok string, ok bool, err error) {
	n := 0
	for _, v := range r.Header.Values("Cookie") {
		n += len(v)
	}
	if n > maxCookieHeader {
		return "", false, invalid("Cookie header larger than 16 KiB")
	}
	c, err := r.Cookie(a.cfg.Cookie)
	if err != nil || c.Value == "" {
		return "", false, nil
	}
	return c.Value, true, nil
}

// ticketParam returns the query parameter ticket=; ok is false when there is none. A
// ticket that is not 43 base64url characters (256 bits) is ErrInvalid.
func ticketParam(r *http.Request) (ticket string, ok bool, err error) {
	vals, ok := r.URL.Query()["ticket"]
	switch {
	case !ok:
		return "", false, nil
	case len(vals) > 1:
		return "", false, invalid("more than one ticket")
	}
	if !wellFormedTicket(vals[0]) {
		return "", false, invalid("ticket is not 43 base64url characters")
	}
	return vals[0], true, nil
}

func wellFormedTicket(s string) bool {
	if len(s) != ticketLen {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == 32
}
