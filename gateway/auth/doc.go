// Package auth decides who a request comes from and which rooms it may read or
// publish to. It is a library: it owns no HTTP routes, writes no responses and talks
// to Redis only through the replay.Tickets and replay.Revocations it is given. The
// gateway calls it, maps its errors to statuses (ErrNoCredential and ErrInvalid to
// 401; a room a valid credential does not grant is its own 403) and ends streams
// when told of a revocation.
//
// # The model
//
// A request becomes a Principal: a user (sub, from a JWT), the token's id (jti), its
// validity, and two lists of Grants, what it may subscribe to and what it may publish
// to. A grant is an exact room name or a prefix ending in "*" ("team-7.*" covers
// "team-7.a", not "team-70"; "*" covers every room). JWTs carry their grants in the
// claim "roomcast": {"subscribe":[...],"publish":[...]}. Every credential may also read
// what an anonymous request may (Config.Anonymous).
//
// A Principal also says who it is for the WebSocket client ids it claims (Identity:
// "sub:<sub>", "key:<n>" for static publish key n, or "anonymous") and which ids it
// may claim (Clients, patterns of client ids: "clients" in the roomcast claim; none
// given, any id). With a JWT key configured, a request without a credential, and a
// token without sub, may claim only AnonymousClients ("anon:*"); without one, every
// request is anonymous and may claim any id. A ticket carries its credential's
// Clients.
//
// Subscribers present a JWT as Authorization: Bearer, or in a cookie
// (Config.Cookie), or redeem a single-use ticket (?ticket=) that a backend obtained
// for them, for EventSource clients that cannot set headers on another origin. The
// first source present wins, and a present but bad credential is refused: it never
// falls through to the next source or to anonymous access. Publishers present a static
// publish key or a JWT as Authorization: Bearer. With no JWT key configured, streams
// are open to all; with no key of any kind, publishing is open (the gateway then
// demands a loopback peer).
//
// Keys are PEM public keys or JWKS files (keys picked by kid) and an optional HS256
// secret; each key verifies only the algorithms that fit it (RSA: RS*/PS*; ECDSA:
// the ES* of its curve; Ed25519: EdDSA; the secret: HS256), and "none" never. The files
// are re-read when they change, every Config.ReloadEvery and, at most once a second,
// when a token names an unknown kid, so keys rotate without a restart; a file that
// turns bad keeps its last good keys. Every token must carry exp and iat, and live
// (exp - iat) at most Config.MaxTokenAge.
//
// Tickets are 256 random bits; the store holds only their SHA-256, with the
// Principal they stand for, for Config.TicketTTL, and TakeTicket deletes on redeem, so a
// ticket works once across the fleet (CheckSubscriber only peeks). A ticket minted by
// a token carries the token's sub, jti, iat and exp (TicketFor), so it never outlives
// the token and its revocation reaches the ticket; only a static publish key names
// another user or a later exp. Revocations refuse a user's tokens issued at or before
// a moment (kind "sub") or one token (kind "jti") until every such token has expired:
// the gateway keeps them for MaxTokenAge plus the leeway. They are shared through
// replay.Revocations and held by every pod in a bounded set.
//
// Errors wrap one of the sentinels with a reason that is safe to show a client and to
// log. Nothing here logs or returns a token, ticket, cookie, secret or key material.
//
// # Concurrency
//
// An Authenticator is safe for concurrent use. New starts one goroutine that watches
// the key files; Start asks Config.Revocations to watch revocations; Close stops both
// and waits for the first. Keys are swapped atomically; the revocation set has its own
// lock, never held while calling out. OnRevoke watchers are called one at a time, under
// a lock of their own that is taken after the set's lock is released.
package auth
