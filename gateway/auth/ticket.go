package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/roomcast/roomcast/replay"
)

const (
	// maxTicketRequest bounds a POST /tickets body.
	maxTicketRequest = 64 << 10
	// maxUnix is the last second of year 9999, the latest exp accepted.
	maxUnix = 253402300799
)

// Ticket is a single-use credential for a cross-origin EventSource.
type Ticket struct {
	ID        string    `json:"ticket"`    // 256 random bits, base64url without padding
	ExpiresAt time.Time `json:"expiresAt"` // RFC 3339 with milliseconds in JSON
}

// MarshalJSON writes ExpiresAt in UTC as RFC 3339 with exactly three decimals.
func (t Ticket) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID        string `json:"ticket"`
		ExpiresAt string `json:"expiresAt"`
	}{t.ID, t.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")})
}

// storedTicket is the value stored for a ticket: small JSON. Times are Unix
// milliseconds, 0 when absent.
type storedTicket struct {
	Sub       string   `json:"sub,omitempty"`
	JTI       string   `json:"jti,omitempty"`
	IssuedAt  int64    `json:"iat,omitempty"`
	Expires   int64    `json:"exp,omitempty"`
	Until     int64    `json:"until"` // the ticket's own end
	Subscribe []string `json:"subscribe"`
	// Clients are the client ids the credential may claim; absent: any (as a
	// Principal's nil Clients).
	Clients *[]string `json:"clients,omitempty"`
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// IssueTicket stores p's Sub, JTI, IssuedAt, Expires and Subscribe grants under a
// digest of a fresh ticket (replay.Tickets.PutTicket with id = hex SHA-256 of the
// ticket, ttl = TicketTTL) and returns the ticket. Redeeming it (Subscriber with
// ?ticket=) yields that Principal with Source ticket, once, across the fleet. A ticket
// whose Principal has been revoked since, or whose credential has expired, is refused.
// ErrNoTickets without Config.Tickets; ErrInvalid for an expired or revoked p. The
// ticket keeps p's Clients too (stored only when p has them, so that a ticket
// without them redeems on a pod of an older version).
func (a *Authenticator) IssueTicket(ctx context.Context, p Principal) (Ticket, error) {
	if a.cfg.Tickets == nil {
		return Ticket{}, ErrNoTickets
	}
	now := a.now()
	if a.expired(p, now) {
		return Ticket{}, invalid("credential expired")
	}
	if a.Revoked(p) {
		return Ticket{}, ErrRevoked
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Ticket{}, fmt.Errorf("auth: ticket: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	expires := time.UnixMilli(now.Add(a.cfg.TicketTTL).UnixMilli())
	st := storedTicket{
		Sub:       p.Sub,
		JTI:       p.JTI,
		IssuedAt:  unixMilli(p.IssuedAt),
		Expires:   unixMilli(p.Expires),
		Until:     expires.UnixMilli(),
		Subscribe: p.Subscribe.strings(),
	}
	if p.Clients != nil {
		clients := p.Clients.strings()
		st.Clients = &clients
	}
	value, err := json.Marshal(st)
	if err != nil {
		return Ticket{}, fmt.Errorf("auth: ticket: %w", err)
	}
	if err := a.cfg.Tickets.PutTicket(ctx, ticketKey(id), value, a.cfg.TicketTTL); err != nil {
		return Ticket{}, fmt.Errorf("auth: store ticket for %q: %w", p.Sub, err)
	}
	return Ticket{ID: id, ExpiresAt: expires.UTC()}, nil
}

// ticketKey is the id a ticket is stored under: the store never sees the ticket.
func ticketKey(ticket string) string {
	sum := sha256.Sum256([]byte(ticket))
	return hex.EncodeToString(sum[:])
}

// redeem takes a well-formed ticket from the store, or with peek only reads it there,
// and returns the Principal it stands for. An unknown, used or expired ticket is
// ErrInvalid, as is one whose credential has expired or was revoked; a store that
// fails is an error wrapping the store's.
func (a *Authenticator) redeem(ctx context.Context, ticket string, peek bool) (Principal, error) {
	if a.cfg.Tickets == nil {
		return Principal{}, invalid("tickets are not enabled")
	}
	read := a.cfg.Tickets.TakeTicket
	if peek {
		read = a.cfg.Tickets.PeekTicket
	}
	value, err := read(ctx, ticketKey(ticket))
	if errors.Is(err, replay.ErrTicketUnknown) {
		return Principal{}, invalid("ticket unknown, used or expired")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: redeem ticket: %w", err)
	}
	var st storedTicket
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return Principal{}, invalid("stored ticket is malformed")
	}
	now := a.now()
	if now.UnixMilli() >= st.Until {
		return Principal{}, invalid("ticket unknown, used or expired")
	}
	grants, err := parseGrants(st.Subscribe, 2*maxGrants, ParsePattern)
	if err != nil {
		return Principal{}, invalid("stored ticket is malformed")
	}
	var clients Grants
	if st.Clients != nil {
		if clients, err = ParseClientGrants(*st.Clients); err != nil {
			return Principal{}, invalid("stored ticket is malformed")
		}
	}
	p := Principal{
		Sub:       st.Sub,
		JTI:       st.JTI,
		IssuedAt:  fromMilli(st.IssuedAt),
		Expires:   fromMilli(st.Expires),
		Subscribe: grants,
		Clients:   clients,
		Source:    SourceTicket,
	}
	if a.expired(p, now) {
		return Principal{}, invalid("credential expired")
	}
	if a.Revoked(p) {
		return Principal{}, ErrRevoked
	}
	return p, nil
}

// expired reports whether p's credential has expired at now, allowing the leeway.
func (a *Authenticator) expired(p Principal, now time.Time) bool {
	return !p.Expires.IsZero() && now.After(p.Expires.Add(a.cfg.Leeway))
}

// TicketRequest is the body a backend with a publish credential may send to POST
// /tickets to name the user and grants itself (a token: its own user only).
type TicketRequest struct {
	Sub       string   `json:"sub"`
	Subscribe []string `json:"subscribe"`
	Exp       int64    `json:"exp,omitempty"` // optional Unix seconds: when streams opened with the ticket must reauth
}

// ParseTicketRequest decodes and validates a TicketRequest body strictly: one JSON
// object, no unknown fields, no trailing data, valid UTF-8, sub of 1 to 256 bytes,
// subscribe patterns as ParseGrants takes them, exp absent or after now. It returns
// the Principal asked for (Source ticket, IssuedAt now), which TicketFor binds to the
// credential that asked. Errors wrap ErrInvalid.
func ParseTicketRequest(body []byte, now time.Time) (Principal, error) {
	if len(body) > maxTicketRequest {
		return Principal{}, invalid("ticket request larger than 64 KiB")
	}
	if !utf8.Valid(body) {
		return Principal{}, invalid("ticket request is not UTF-8")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Principal{}, invalid(`ticket request is not a JSON object {"sub","subscribe","exp"}`)
	}
	var req TicketRequest
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field") {
			return Principal{}, invalid(`ticket request has a field other than "sub", "subscribe" and "exp"`)
		}
		return Principal{}, invalid(`ticket request is not a JSON object {"sub","subscribe","exp"}`)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Principal{}, invalid("ticket request has data after its object")
	}
	if req.Sub == "" || len(req.Sub) > maxID {
		return Principal{}, invalid("ticket request sub must be 1 to 256 bytes")
	}
	grants, err := ParseGrants(req.Subscribe)
	if err != nil {
		return Principal{}, fmt.Errorf("auth: ticket request subscribe: %w", err)
	}
	p := Principal{Sub: req.Sub, IssuedAt: now, Subscribe: grants, Source: SourceTicket}
	if req.Exp != 0 {
		if req.Exp < 0 || req.Exp > maxUnix {
			return Principal{}, invalid("ticket request exp out of range")
		}
		p.Expires = time.Unix(req.Exp, 0)
		if !p.Expires.After(now) {
			return Principal{}, invalid("ticket request exp is in the past")
		}
	}
	return p, nil
}

// TicketFor returns the Principal to issue a ticket for when pub, a publish
// credential, asks for req (from ParseTicketRequest). A static publish key (or, with
// no key configured, a loopback publisher) speaks for the backend: the ticket is req
// as asked. A JWT speaks for its own user only, and the ticket stays bound to it:
// req.Sub must be the token's sub (ErrOtherUser otherwise); the ticket carries the
// token's jti and iat, so that revoking the token or its user refuses the ticket and
// ends the streams opened with it; and its exp is the token's, or req's when that is
// earlier. Whether pub's publish grants cover req's subscribe grants is the caller's
// check.
func TicketFor(pub, req Principal) (Principal, error) {
	if pub.Source == SourceStatic || pub.Source == SourceAnonymous {
		return req, nil
	}
	if req.Sub != pub.Sub {
		return Principal{}, ErrOtherUser
	}
	req.JTI, req.IssuedAt = pub.JTI, pub.IssuedAt
	if !pub.Expires.IsZero() && (req.Expires.IsZero() || pub.Expires.Before(req.Expires)) {
		req.Expires = pub.Expires
	}
	return req, nil
}
