package auth

import (
	"strconv"
	"time"
)

// Source names where a Principal's credential came from.
type Source string

// The sources of a credential.
const (
	SourceAnonymous Source = "anonymous"
	SourceBearer    Source = "bearer"
	SourceCookie    Source = "cookie"
	SourceTicket    Source = "ticket"
	SourceStatic    Source = "static" // a static publish key
)

// Principal is who made a request and what it may do.
type Principal struct {
	Sub       string    // the token's sub ("" when anonymous or a static key)
	JTI       string    // the token's jti, if any
	IssuedAt  time.Time // iat; zero when absent
	Expires   time.Time // exp; zero: the credential does not expire (static key, anonymous, open mode)
	Subscribe Grants
	Publish   Grants
	// Clients are the WebSocket client ids the credential may claim (patterns of
	// client ids). Nil: any id, as a token without the claim "clients" may; an
	// empty non-nil list: none.
	Clients Grants
	// Key names the static publish key of Source static: its position in
	// Config.PublishKeys, from 1.
	Key    int
	Source Source
}

// AnonymousIdentity is the Identity of a principal with no subject and no key.
const AnonymousIdentity = "anonymous"

// Identity names who p is, for binding WebSocket client ids: "sub:<sub>" for a
// credential with a subject, "key:<n>" for static publish key n, else
// AnonymousIdentity (no credential, or a token without sub). It holds no secret.
func (p Principal) Identity() string {
	switch {
	case p.Sub != "":
		return "sub:" + p.Sub
	case p.Source == SourceStatic && p.Key > 0:
		return "key:" + strconv.Itoa(p.Key)
	}
	return AnonymousIdentity
}

// CanClaim reports whether p may claim the WebSocket client id client.
func (p Principal) CanClaim(client string) bool { return p.Clients == nil || p.Clients.Allows(client) }

// CanSubscribe reports whether p may read room.
func (p Principal) CanSubscribe(room string) bool { return p.Subscribe.Allows(room) }

// CanPublish reports whether p may publish to room.
func (p Principal) CanPublish(room string) bool { return p.Publish.Allows(room) }

// all is the grant list that allows every room.
var all = Grants{"*"}
