package auth

import (
	"errors"
	"fmt"
)

// Errors returned by this package wrap one of these with a reason that is safe to show
// a client and to log: it never contains a token, a ticket, a cookie or key material.
var (
	// ErrNoCredential: none was presented where one is needed (the gateway answers 401).
	ErrNoCredential = errors.New("auth: no credential")
	// ErrInvalid: a credential was presented but is bad: its signature, algorithm,
	// validity window, audience or issuer, its form, a revocation, or an unknown or
	// used ticket (401). Malformed patterns and ticket requests wrap it too.
	ErrInvalid = errors.New("auth: invalid credential")
	// ErrRevoked: the credential was revoked (POST /admin/revoke). It wraps ErrInvalid.
	ErrRevoked = fmt.Errorf("%w: credential revoked", ErrInvalid)
	// ErrOtherUser: a token asked for a ticket for a user other than its own sub
	// (TicketFor); only a static publish key names any user. The gateway answers 403.
	ErrOtherUser = errors.New("auth: a token may ask for a ticket for its own sub only")
	// ErrNoTickets: IssueTicket was called but Config.Tickets is nil.
	ErrNoTickets = errors.New("auth: tickets are not configured")
)
