package auth

import "time"

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
	Source    Source
}

// CanSubscribe reports whether p may read room.
func (p Principal) CanSubscribe(room string) bool { return p.Subscribe.Allows(room) }

// CanPublish reports whether p may publish to room.
func (p Principal) CanPublish(room string) bool { return p.Publish.Allows(room) }

// all is the grant list that allows every room.
var all = Grants{"*"}
