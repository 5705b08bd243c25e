package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

// askTicket posts body to POST /tickets with the bearer credential and returns the
// answer; for 201 the ticket, for anything else the JSON error's code and message.
func askTicket(t testing.TB, p *securePod, bearer, body string) (status int, ticket, code, message string) {
	t.Helper()
	res := do(t, http.MethodPost, p.public.URL+"/tickets", body, "Authorization", "Bearer "+bearer, "Content-Type", "application/json")
	var out struct{ Ticket, Error, Message string }
	if err := json.Unmarshal([]byte(res.body), &out); err != nil {
		t.Fatalf("POST /tickets: %d %q is not JSON", res.status, res.body)
	}
	if res.status == http.StatusCreated {
		gatewaytest.Secret("a ticket", out.Ticket)
	}
	return res.status, out.Ticket, out.Error, out.Message
}

// TestTicketOfATokenEndsWithIt: a ticket a token asks for in the backend form
// ({"sub","subscribe","exp"}) is for the token's own user only, and stays bound to
// the token across the fleet (the ticket's record makes the round trip through the
// store): revoking the token's jti or its user ends the streams opened with it and
// refuses it at redemption, and its streams end at the token's exp whatever exp was
// asked for.
func TestTicketOfATokenEndsWithIt(t *testing.T) {
	for _, kind := range []string{"memory", "standalone", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			keys := gatewaytest.NewKeys(t)
			var a, b *securePod
			switch kind {
			case "memory":
				a = newMemSecurePod(t, keys, gateway.Config{})
				b = a
			case "standalone":
				c := redistest.SharedStandalone(t)
				a, b = newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{}), newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{})
			case "cluster":
				c := redistest.SharedCluster(t)
				a, b = newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{}), newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{})
			}
			user := redistest.Prefix(t)
			room := "u." + user
			// A backend's token: it may publish to its user's room, and names a jti.
			backend := func(jti string, ttl time.Duration) string {
				c := gatewaytest.UserClaims(user, ttl, nil, []string{room})
				c["aud"], c["iss"], c["jti"] = testAudience, testIssuer, jti
				c["iat"] = time.Now().Add(-10 * time.Second).Unix()
				return a.keys.Sign(t, "ES256", c)
			}
			const year9999 = `,"exp":253402300799}`
			ask := `{"sub":"` + user + `","subscribe":["` + room + `"]`

			tok := backend(user+"-1", time.Hour)
			status, _, code, msg := askTicket(t, a, tok, `{"sub":"someone-else","subscribe":["`+room+`"]}`)
			if status != http.StatusForbidden || code != "forbidden" || !strings.Contains(msg, "own sub") {
				t.Fatalf("a token asking for another user's ticket: %d %s %q, want 403 forbidden naming its own sub", status, code, msg)
			}

			// Revoking the token's jti ends the stream opened with its ticket, on
			// the other pod, and refuses a ticket it minted before.
			status, onB, _, msg := askTicket(t, a, tok, ask+year9999)
			if status != http.StatusCreated {
				t.Fatalf("a token asking for its own user's ticket: %d %s", status, msg)
			}
			_, unused, _, _ := askTicket(t, a, tok, ask+"}")
			s := b.subscribe(t, room, "ticket="+onB)
			expectAnchor(t, s)
			revoke(t, a.pod, `{"jti":"`+user+`-1"}`)
			expectReauth(t, s, room)
			if got := openStatus(t, b.public.URL, room, "ticket="+unused); got != http.StatusUnauthorized {
				t.Fatalf("a ticket of a revoked token: %d, want 401", got)
			}

			// Revoking the user does the same for another token of theirs.
			tok = backend(user+"-2", time.Hour)
			_, onB, _, _ = askTicket(t, a, tok, ask+year9999)
			_, unused, _, _ = askTicket(t, a, tok, ask+"}")
			s = b.subscribe(t, room, "ticket="+onB)
			expectAnchor(t, s)
			revoke(t, a.pod, `{"sub":"`+user+`"}`)
			expectReauth(t, s, room)
			if got := openStatus(t, b.public.URL, room, "ticket="+unused); got != http.StatusUnauthorized {
				t.Fatalf("a ticket of a revoked user: %d, want 401", got)
			}
		})
	}
}

// TestTicketOfATokenExpiresWithIt: a stream opened with a ticket that a token asked
// for, with an exp in year 9999, ends with a reauth at the token's exp.
func TestTicketOfATokenExpiresWithIt(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	const room = "u.svc"
	tok := p.token(t, "EdDSA", "svc", 2*time.Second, nil, []string{room})
	exp := int64(gatewaytest.ClaimsOf(t, tok)["exp"].(float64))
	status, ticket, _, msg := askTicket(t, p, tok, `{"sub":"svc","subscribe":["u.svc"],"exp":253402300799}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /tickets: %d %s", status, msg)
	}
	s := p.subscribe(t, room, "ticket="+ticket)
	expectAnchor(t, s)
	if got := expectReauth(t, s, room); got != exp {
		t.Fatalf("reauth exp %d, want the token's %d", got, exp)
	}
}

// TestHeadChecksTicketsWithoutSpendingThem: a HEAD of a stream, of one room or of
// several, answers what a GET with the same ticket answers, and leaves the ticket
// for that GET.
func TestHeadChecksTicketsWithoutSpendingThem(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	tok := p.token(t, "EdDSA", "ana", time.Hour, []string{"team-7.*"}, nil)
	c := gatewaytest.UserClaims("ana", time.Hour, []string{"team-7.*"}, nil)
	c["aud"], c["iss"], c["jti"] = testAudience, testIssuer, "head-revoked"
	c["iat"] = time.Now().Add(-10 * time.Second).Unix()
	revokedTicket := p.ticket(t, p.keys.Sign(t, "EdDSA", c))
	revoke(t, p.pod, `{"jti":"head-revoked"}`)
	used := p.ticket(t, tok)
	if got := openStatus(t, p.public.URL, "team-7.a", "ticket="+used); got != http.StatusOK {
		t.Fatalf("spending a ticket: %d", got)
	}

	urls := map[string]func(rooms []string, query string) string{
		"one room": func(rooms []string, query string) string {
			return p.public.URL + "/rooms/" + rooms[0] + "/events?" + query
		},
		"several rooms": func(rooms []string, query string) string {
			return muxURL(p.public.URL, append(rooms, "team-7.b"), query)
		},
	}
	for name, url := range urls {
		for _, tc := range []struct {
			name   string
			room   string
			ticket func() string
			want   int
		}{
			{"unknown ticket", "team-7.a", func() string { return strings.Repeat("A", 43) }, http.StatusUnauthorized},
			{"malformed ticket", "team-7.a", func() string { return "junk" }, http.StatusUnauthorized},
			{"used ticket", "team-7.a", func() string { return used }, http.StatusUnauthorized},
			{"revoked ticket", "team-7.a", func() string { return revokedTicket }, http.StatusUnauthorized},
			{"room not granted", "team-8.a", func() string { return p.ticket(t, tok) }, http.StatusForbidden},
			{"good ticket", "team-7.a", func() string { return p.ticket(t, tok) }, http.StatusOK},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				u := url([]string{tc.room}, "ticket="+tc.ticket())
				for range 2 {
					if res := do(t, http.MethodHead, u, ""); res.status != tc.want || res.body != "" {
						t.Fatalf("HEAD: %d %q, want %d and no body", res.status, res.body, tc.want)
					}
				}
				if res := doStream(t, u); res.status != tc.want {
					t.Fatalf("GET after the HEADs: %d, want %d", res.status, tc.want)
				}
			})
		}
	}
}

// TestTicketMintsNoTicket: a ticket is no credential for POST /tickets, and asking
// with one does not spend it.
func TestTicketMintsNoTicket(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	tok := p.token(t, "EdDSA", "ana", time.Hour, []string{"team-7.*"}, nil)
	ticket := p.ticket(t, tok)
	res := do(t, http.MethodPost, p.public.URL+"/tickets?ticket="+ticket, "")
	// With a token beside it, the token asks and the ticket is left alone.
	if res := do(t, http.MethodPost, p.public.URL+"/tickets?ticket="+ticket, "", "Authorization", "Bearer "+tok); res.status != http.StatusCreated {
		t.Fatalf("POST /tickets?ticket= with a token: %d %s", res.status, res.body)
	}
	if got := openStatus(t, p.public.URL, "team-7.a", "ticket="+ticket); got != http.StatusOK {
		t.Fatalf("the ticket's stream after POST /tickets?ticket=: %d, want 200", got)
	}
	var body struct{ Error, Message string }
	if err := json.Unmarshal([]byte(res.body), &body); err != nil || res.status != http.StatusUnauthorized ||
		body.Error != "unauthorized" || !strings.Contains(body.Message, "not spent") || res.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("POST /tickets?ticket=: %d %s, want 401 saying the ticket was not spent", res.status, res.body)
	}
}
