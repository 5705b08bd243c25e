package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestClientsClaim: the roomcast claim's "clients" limits the WebSocket client ids
// a token may claim; without it a token may claim any id, and a token without sub
// follows the anonymous rule (anon:* only). Malformed patterns refuse the token.
func TestClientsClaim(t *testing.T) {
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Now: replaytest.NewClock(t0).Now})
	token := func(sub string, clients any) string {
		c := claims(sub, []string{"lobby"}, nil)
		if clients != nil {
			c["roomcast"].(map[string]any)["clients"] = clients
		}
		if sub == "" {
			delete(c, "sub")
		}
		return gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", c)
	}
	tests := []struct {
		name     string
		tok      string
		identity string
		may, not []string
	}{
		{"absent", token("u1", nil), "sub:u1", []string{"rig-1", "anon:x", "agent-7"}, nil},
		{"patterns", token("u2", []string{"agent-*", "rig:0414"}), "sub:u2", []string{"agent-7", "rig:0414"}, []string{"agent-", "rig:04145", "anon:x"}},
		{"empty", token("u3", []string{}), "sub:u3", nil, []string{"rig-1", "anon:x"}},
		{"no sub", token("", []string{"*"}), auth.AnonymousIdentity, []string{"anon:x"}, []string{"rig-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Subscriber(t.Context(), streamRequest(tt.tok, "", ""))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Identity(); got != tt.identity {
				t.Errorf("Identity() = %q, want %q", got, tt.identity)
			}
			checkClaims(t, p, tt.may, tt.not)
		})
	}
	for _, bad := range []any{"agent-*", []string{"a b"}, []string{"*x"}, []string{""}, []any{1}} {
		if _, err := a.Subscriber(t.Context(), streamRequest(token("u1", bad), "", "")); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("clients %v: %v; want ErrInvalid", bad, err)
		}
	}
}

// TestAnonymousClients: with a JWT key, a request without a credential may claim
// only anon:* client ids; without one (open mode) any id.
func TestAnonymousClients(t *testing.T) {
	closed := newAuth(t, auth.Config{HMACFile: hmacFile(t)})
	p, err := closed.Subscriber(t.Context(), streamRequest("", "", ""))
	if err != nil || p.Identity() != auth.AnonymousIdentity || !p.CanClaim("anon:rig") || p.CanClaim("rig") || p.CanClaim("anon") {
		t.Fatalf("with a key: %+v, %v", p, err)
	}
	open := newAuth(t, auth.Config{PublishKeys: []string{"key-one"}})
	p, err = open.Subscriber(t.Context(), streamRequest("", "", ""))
	if err != nil || p.Identity() != auth.AnonymousIdentity || !p.CanClaim("rig") || !p.CanClaim("anon:rig") {
		t.Fatalf("open: %+v, %v", p, err)
	}
}

// TestStaticKeyIdentity: a static publish key is named by its position, never by
// its content.
func TestStaticKeyIdentity(t *testing.T) {
	a := newAuth(t, auth.Config{PublishKeys: []string{"key-one", "key-two", "key-three"}})
	for i, key := range []string{"key-one", "key-two", "key-three"} {
		p, err := a.Publisher(publishRequest("Bearer " + key))
		want := "key:" + string(rune('1'+i))
		if err != nil || p.Key != i+1 || p.Identity() != want || !p.CanClaim("any") {
			t.Fatalf("key %d: %+v, %v; want identity %s", i+1, p, err, want)
		}
	}
}

func TestParseClientPattern(t *testing.T) {
	for _, ok := range []string{"anon:*", "rig:0414", "*", "aZ09._~:-", strings.Repeat("c", 128), strings.Repeat("c", 128) + "*"} {
		if p, err := auth.ParseClientPattern(ok); err != nil || string(p) != ok {
			t.Errorf("ParseClientPattern(%q) = %q, %v", ok, p, err)
		}
	}
	for _, bad := range []string{"", "a b", "a*b", "**", "{x}", strings.Repeat("c", 129), "é"} {
		if _, err := auth.ParseClientPattern(bad); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("ParseClientPattern(%q): %v; want ErrInvalid", bad, err)
		}
	}
	// Rooms never hold a colon.
	if _, err := auth.ParsePattern("anon:*"); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("ParsePattern(anon:*): %v; want ErrInvalid", err)
	}
}

// TestTicketCarriesClients: a ticket allows the client ids of the credential it was
// issued for, no more; a ticket of a credential without the limit allows any.
func TestTicketCarriesClients(t *testing.T) {
	c := replaytest.NewClock(t0)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Tickets: newMemTickets(c.Now), Now: c.Now})
	for _, tt := range []struct {
		name    string
		clients auth.Grants
		may     []string
		not     []string
	}{
		{"limited", auth.Grants{"agent-*"}, []string{"agent-1"}, []string{"rig", "anon:x"}},
		{"none", auth.Grants{}, nil, []string{"agent-1", "anon:x"}},
		{"any", nil, []string{"agent-1", "rig"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tk, err := a.IssueTicket(t.Context(), auth.Principal{Sub: "u1", Subscribe: auth.Grants{"lobby"}, Clients: tt.clients, Source: auth.SourceBearer})
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Subscriber(t.Context(), streamRequest("", "", tk.ID))
			if err != nil || p.Identity() != "sub:u1" {
				t.Fatalf("redeem: %+v, %v", p, err)
			}
			checkClaims(t, p, tt.may, tt.not)
		})
	}
}

// checkClaims checks that p may claim the client ids of may and none of not.
func checkClaims(t *testing.T, p auth.Principal, may, not []string) {
	t.Helper()
	for _, id := range may {
		if !p.CanClaim(id) {
			t.Errorf("may not claim %q", id)
		}
	}
	for _, id := range not {
		if p.CanClaim(id) {
			t.Errorf("may claim %q", id)
		}
	}
}
