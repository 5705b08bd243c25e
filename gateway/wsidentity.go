package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/gateway/auth"
)

// Who may claim which WebSocket client id. A connection claims its hello's client
// as its identity (auth.Principal.Identity: the credential's subject, the static
// publish key it carries, or anonymous), and only within what its credential allows
// (auth.Principal.Clients: the roomcast claim's "clients"; an anonymous connection
// may claim only anon:* ids once a JWT key is configured). The registry binds the id
// to that identity while its entry lives: a claim by another identity is refused
// with 4403. A boot whose timestamp is more than wsBootSkew ahead of this pod's clock
// is refused with 4400, so that no hello can hold an id against every later boot of
// its process.

// wsBootSkew is how far ahead of the pod's clock a hello's boot may be (clock skew
// between the client's host and the pod's).
const wsBootSkew = time.Minute

// wsClaimant is who a connection claims client ids as: its credential, or, for a
// connection without one that carries a static publish key (a publisher's agent on
// a gateway without JWT keys), that key; nil when it is who.
func (s *Server) wsClaimant(r *http.Request, who *auth.Principal) *auth.Principal {
	if who.Source != auth.SourceAnonymous || r.Header.Get("Authorization") == "" {
		return nil
	}
	if p, err := s.auth.Publisher(r); err == nil && p.Source == auth.SourceStatic {
		return &p
	}
	return nil
}

// claimantOrWho is who the connection claims its client as (wsClaimant).
func (wc *wsConn) claimantOrWho() *auth.Principal {
	if wc.claimant != nil {
		return wc.claimant
	}
	return &wc.who
}

// checkClient applies the credential's client ids to the hello's client: 4401 when
// an anonymous connection names an id outside its namespace, 4403 when a credential
// names one it does not allow.
func (wc *wsConn) checkClient() (websocket.StatusCode, string) {
	switch {
	case wc.claimantOrWho().CanClaim(wc.client):
		return 0, ""
	case wc.claimantOrWho().Identity() == auth.AnonymousIdentity:
		wc.s.refuse("subscribe", "credential")
		return wsUnauthorized, "unauthorized: without a credential a client id must match " + string(auth.AnonymousClients)
	default:
		wc.s.refuse("subscribe", "grant")
		return wsForbidden, "forbidden: the credential does not grant this client id"
	}
}

// logClose logs a close that refused or ended a connection because of who it is or
// what it sent (4400, 4401, 4403, 4409, and 1008 for its rate), once, with its identity, client id (when the
// hello named a valid one), pod and reason; never its credential.
func (wc *wsConn) logClose(code websocket.StatusCode, reason string) {
	level := slog.LevelInfo
	switch code {
	case wsBadHello, wsUnauthorized, wsSuperseded:
	case wsForbidden, wsPolicyViolation:
		level = slog.LevelWarn
	default:
		return
	}
	attrs := append([]any{"code", int(code), "reason", reason, "client", wc.client, "agent", wc.agent, "identity", wc.identity,
		"pod", wc.s.cfg.PodID, "session", wc.session}, wc.closeAttrs...)
	wc.s.cfg.Logger.Log(context.Background(), level, "websocket client closed", attrs...)
}
