package auth_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestTicketOnce(t *testing.T) {
	c := replaytest.NewClock(t0)
	tickets := newMemTickets(c.Now)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Tickets: tickets, Now: c.Now})
	want := auth.Principal{
		Sub: "u1", JTI: "j1", IssuedAt: t0.Add(-time.Minute), Expires: t0.Add(time.Hour),
		Subscribe: auth.Grants{"team-7.*", "lobby"}, Publish: auth.Grants{"lobby"}, Source: auth.SourceCookie,
	}
	tk, err := a.IssueTicket(t.Context(), want)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`).MatchString(tk.ID) {
		t.Fatalf("ticket %q is not 43 base64url characters", tk.ID)
	}
	if !tk.ExpiresAt.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("ExpiresAt = %v, want t0+30s (the default TTL)", tk.ExpiresAt)
	}
	for id := range tickets.items {
		if strings.Contains(id, tk.ID) {
			t.Fatal("the store holds the ticket itself, not a digest")
		}
	}
	p, err := a.Subscriber(t.Context(), streamRequest("", "", tk.ID))
	if err != nil {
		t.Fatalf("first redeem: %v", err)
	}
	if p.Sub != want.Sub || p.JTI != want.JTI || !p.IssuedAt.Equal(want.IssuedAt) || !p.Expires.Equal(want.Expires) ||
		p.Source != auth.SourceTicket || len(p.Subscribe) != 2 || !p.CanSubscribe("team-7.x") || !p.CanSubscribe("lobby") || p.CanPublish("lobby") {
		t.Fatalf("redeemed %+v; want %+v with source ticket and no publish grants", p, want)
	}
	if _, err := a.Subscriber(t.Context(), streamRequest("", "", tk.ID)); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("second redeem: error = %v, want ErrInvalid", err)
	}
}

func TestTicketJSON(t *testing.T) {
	tk := auth.Ticket{ID: "abc", ExpiresAt: time.Date(2026, 3, 1, 12, 0, 30, 0, time.FixedZone("x", 3600))}
	b, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ticket":"abc","expiresAt":"2026-03-01T11:00:30.000Z"}`; string(b) != want {
		t.Fatalf("JSON = %s, want %s", b, want)
	}
	var back auth.Ticket
	if err := json.Unmarshal(b, &back); err != nil || back.ID != tk.ID || !back.ExpiresAt.Equal(tk.ExpiresAt) {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}

func TestTicketExpires(t *testing.T) {
	c := replaytest.NewClock(t0)
	tickets := newMemTickets(c.Now)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Tickets: tickets, TicketTTL: 10 * time.Second, Now: c.Now})
	p := auth.Principal{Sub: "u1", Subscribe: auth.Grants{"lobby"}, Source: auth.SourceBearer}
	late, err := a.IssueTicket(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	onTime, err := a.IssueTicket(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(9 * time.Second)
	if _, err := a.Subscriber(t.Context(), streamRequest("", "", onTime.ID)); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	c.Advance(2 * time.Second)
	if _, err := a.Subscriber(t.Context(), streamRequest("", "", late.ID)); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("after the TTL: error = %v, want ErrInvalid", err)
	}
}

// TestTicketCredentialExpired: a ticket does not outlive the credential it was issued for.
func TestTicketCredentialExpired(t *testing.T) {
	c := replaytest.NewClock(t0)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Tickets: newMemTickets(c.Now), Now: c.Now})
	if _, err := a.IssueTicket(t.Context(), auth.Principal{Sub: "u1", Expires: t0.Add(-time.Minute)}); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("issuing for an expired credential: %v", err)
	}
	tk, err := a.IssueTicket(t.Context(), auth.Principal{Sub: "u1", Expires: t0.Add(10 * time.Second), Subscribe: auth.Grants{"lobby"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(20 * time.Second) // past the credential (and its 5s leeway), within the ticket's 30s
	if _, err := a.Subscriber(t.Context(), streamRequest("", "", tk.ID)); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("redeeming for an expired credential: error = %v, want ErrInvalid", err)
	}
}

func TestTicketsNotConfigured(t *testing.T) {
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t)})
	if _, err := a.IssueTicket(t.Context(), auth.Principal{Sub: "u1"}); !errors.Is(err, auth.ErrNoTickets) {
		t.Fatalf("IssueTicket error = %v, want ErrNoTickets", err)
	}
	ticket := strings.Repeat("A", 43)
	if _, err := a.Subscriber(t.Context(), streamRequest("", "", ticket)); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("?ticket= without tickets: error = %v, want ErrInvalid", err)
	}
}

func TestParseTicketRequest(t *testing.T) {
	now := t0
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"sub and grants", `{"sub":"u1","subscribe":["team-7.*","lobby"]}`, true},
		{"with exp", `{"sub":"u1","subscribe":["lobby"],"exp":` + itoa(now.Add(time.Hour).Unix()) + `}`, true},
		{"no grants", `{"sub":"u1","subscribe":[]}`, true},
		{"exp in the past", `{"sub":"u1","subscribe":["lobby"],"exp":` + itoa(now.Add(-time.Second).Unix()) + `}`, false},
		{"exp now", `{"sub":"u1","subscribe":["lobby"],"exp":` + itoa(now.Unix()) + `}`, false},
		{"exp negative", `{"sub":"u1","subscribe":["lobby"],"exp":-5}`, false},
		{"exp fractional", `{"sub":"u1","subscribe":["lobby"],"exp":1.5}`, false},
		{"exp past year 9999", `{"sub":"u1","subscribe":["lobby"],"exp":253402300800}`, false},
		{"unknown field", `{"sub":"u1","subscribe":["lobby"],"publish":["lobby"]}`, false},
		{"trailing data", `{"sub":"u1","subscribe":["lobby"]} {}`, false},
		{"trailing garbage", `{"sub":"u1","subscribe":["lobby"]}x`, false},
		{"sub too long", `{"sub":"` + strings.Repeat("u", 257) + `","subscribe":["lobby"]}`, false},
		{"sub of 256 bytes", `{"sub":"` + strings.Repeat("u", 256) + `","subscribe":["lobby"]}`, true},
		{"sub not UTF-8", "{\"sub\":\"u\xff\",\"subscribe\":[\"lobby\"]}", false},
		{"sub missing", `{"subscribe":["lobby"]}`, false},
		{"bad pattern", `{"sub":"u1","subscribe":["a*b"]}`, false},
		{"not an object", `["u1"]`, false},
		{"empty", ``, false},
		{"null", `null`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := auth.ParseTicketRequest([]byte(tt.body), now)
			if !tt.ok {
				if !errors.Is(err, auth.ErrInvalid) {
					t.Fatalf("error = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Source != auth.SourceTicket || p.Sub == "" || !p.IssuedAt.Equal(now) || len(p.Publish) != 0 {
				t.Fatalf("principal = %+v", p)
			}
		})
	}
	p, err := auth.ParseTicketRequest([]byte(`{"sub":"u1","subscribe":["team-7.*"],"exp":`+itoa(now.Add(time.Hour).Unix())+`}`), now)
	if err != nil || !p.Expires.Equal(now.Add(time.Hour)) || !p.CanSubscribe("team-7.a") || p.CanSubscribe("team-70") {
		t.Fatalf("principal = %+v, %v", p, err)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestTicketFor(t *testing.T) {
	tokenExp := t0.Add(6 * time.Second)
	token := auth.Principal{
		Sub: "svc", JTI: "t-9", IssuedAt: t0.Add(-time.Minute), Expires: tokenExp,
		Publish: auth.Grants{"u.svc"}, Source: auth.SourceBearer,
	}
	static := auth.Principal{Publish: auth.Grants{"*"}, Source: auth.SourceStatic}
	ask := func(sub string, exp time.Time) auth.Principal {
		return auth.Principal{Sub: sub, IssuedAt: t0, Expires: exp, Subscribe: auth.Grants{"u.svc"}, Source: auth.SourceTicket}
	}
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	tests := []struct {
		name    string
		pub     auth.Principal
		req     auth.Principal
		want    auth.Principal // compared on Sub, JTI, IssuedAt, Expires
		wantErr error
	}{
		{"static key names any user and exp", static, ask("bob", far), ask("bob", far), nil},
		{"static key without exp", static, ask("bob", time.Time{}), ask("bob", time.Time{}), nil},
		{"token, its own sub, no exp: the token's", token, ask("svc", time.Time{}),
			auth.Principal{Sub: "svc", JTI: "t-9", IssuedAt: token.IssuedAt, Expires: tokenExp}, nil},
		{"token, its own sub, a later exp: the token's", token, ask("svc", far),
			auth.Principal{Sub: "svc", JTI: "t-9", IssuedAt: token.IssuedAt, Expires: tokenExp}, nil},
		{"token, its own sub, an earlier exp: that one", token, ask("svc", t0.Add(time.Second)),
			auth.Principal{Sub: "svc", JTI: "t-9", IssuedAt: token.IssuedAt, Expires: t0.Add(time.Second)}, nil},
		{"token, another user", token, ask("bob", time.Time{}), auth.Principal{}, auth.ErrOtherUser},
		{"token without sub", auth.Principal{JTI: "t-1", Expires: tokenExp, Source: auth.SourceBearer}, ask("bob", time.Time{}), auth.Principal{}, auth.ErrOtherUser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := auth.TicketFor(tt.pub, tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Sub != tt.want.Sub || got.JTI != tt.want.JTI || !got.IssuedAt.Equal(tt.want.IssuedAt) ||
				!got.Expires.Equal(tt.want.Expires) || got.Source != auth.SourceTicket || !got.CanSubscribe("u.svc") {
				t.Fatalf("TicketFor = %+v, %v; want %+v with source ticket and the asked grants", got, err, tt.want)
			}
		})
	}
}

// TestTicketOfATokenIsBoundToIt: a ticket a token asked for in the backend form is
// stored with the token's jti, iat and exp: it is redeemed with the token's exp, and
// revoking the token or its user refuses it at redemption.
func TestTicketOfATokenIsBoundToIt(t *testing.T) {
	c := replaytest.NewClock(t0)
	cl := claims("svc", nil, []string{"u.svc"})
	cl["jti"], cl["exp"] = "t-9", t0.Add(6*time.Second).Unix()
	token := gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", cl)
	// issue asks a for a ticket with the token, for its own user and year 9999.
	issue := func(t *testing.T, a *auth.Authenticator) string {
		t.Helper()
		pub, err := a.Publisher(streamRequest(token, "", ""))
		if err != nil {
			t.Fatal(err)
		}
		req, err := auth.ParseTicketRequest([]byte(`{"sub":"svc","subscribe":["u.svc"],"exp":253402300799}`), t0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := auth.TicketFor(pub, req)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := a.IssueTicket(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	newA := func(t *testing.T) *auth.Authenticator {
		return newAuth(t, auth.Config{HMACFile: hmacFile(t), Tickets: newMemTickets(c.Now), Now: c.Now})
	}
	a := newA(t)
	p, err := a.Subscriber(t.Context(), streamRequest("", "", issue(t, a)))
	if err != nil || p.JTI != "t-9" || p.Sub != "svc" || !p.Expires.Equal(t0.Add(6*time.Second)) || !p.IssuedAt.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("redeemed %+v, %v; want the token's sub, jti, iat and exp", p, err)
	}
	for _, rev := range []struct{ kind, value string }{{"jti", "t-9"}, {"sub", "svc"}} {
		t.Run(rev.kind, func(t *testing.T) {
			a := newA(t)
			tk := issue(t, a)
			if err := a.Revoke(t.Context(), rev.kind, rev.value, time.Hour); err != nil {
				t.Fatal(err)
			}
			if _, err := a.CheckSubscriber(t.Context(), streamRequest("", "", tk)); !errors.Is(err, auth.ErrRevoked) {
				t.Fatalf("checking a ticket of a revoked %s: %v, want ErrRevoked", rev.kind, err)
			}
			if _, err := a.Subscriber(t.Context(), streamRequest("", "", tk)); !errors.Is(err, auth.ErrRevoked) {
				t.Fatalf("redeeming a ticket of a revoked %s: %v, want ErrRevoked", rev.kind, err)
			}
		})
	}
}

// TestCheckSubscriberLeavesTheTicket: a check answers as a redemption would, and the
// ticket is still there for the redemption.
func TestCheckSubscriberLeavesTheTicket(t *testing.T) {
	a, ticket, tickets := subscriberSetup(t)
	for range 2 {
		p, err := a.CheckSubscriber(t.Context(), streamRequest("", "", ticket))
		if err != nil || p.Sub != "by-ticket" || p.Source != auth.SourceTicket || !p.CanSubscribe("lobby") {
			t.Fatalf("check = %+v, %v", p, err)
		}
	}
	if n := tickets.Takes(); n != 0 {
		t.Fatalf("a check took the ticket from the store (%d takes)", n)
	}
	if p, err := a.Subscriber(t.Context(), streamRequest("", "", ticket)); err != nil || p.Sub != "by-ticket" {
		t.Fatalf("redeem after the checks = %+v, %v", p, err)
	}
	if _, err := a.CheckSubscriber(t.Context(), streamRequest("", "", ticket)); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("check of a redeemed ticket: %v, want ErrInvalid", err)
	}
	if _, err := a.CheckSubscriber(t.Context(), streamRequest("", "", strings.Repeat("A", 43))); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("check of an unknown ticket: %v, want ErrInvalid", err)
	}
}

// TestTokenNeverReadsATicket: Token takes a JWT only; a ticket is left untouched.
func TestTokenNeverReadsATicket(t *testing.T) {
	a, ticket, tickets := subscriberSetup(t)
	if _, err := a.Token(streamRequest("", "", ticket)); !errors.Is(err, auth.ErrNoCredential) {
		t.Fatalf("Token with a ticket alone: %v, want ErrNoCredential", err)
	}
	if _, err := a.Token(streamRequest("", "", "")); !errors.Is(err, auth.ErrNoCredential) {
		t.Fatalf("Token with nothing: %v, want ErrNoCredential", err)
	}
	if p, err := a.Token(streamRequest("", hs(t, "by-cookie"), ticket)); err != nil || p.Source != auth.SourceCookie || p.Sub != "by-cookie" {
		t.Fatalf("Token with a cookie = %+v, %v", p, err)
	}
	if _, err := a.Token(streamRequest("x.y.z", "", "")); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("Token with a bad bearer: %v, want ErrInvalid", err)
	}
	if n := tickets.Takes(); n != 0 {
		t.Fatalf("Token took a ticket from the store (%d takes)", n)
	}
	if _, err := a.Subscriber(t.Context(), streamRequest("", "", ticket)); err != nil {
		t.Fatalf("the ticket after Token: %v", err)
	}
	open := newAuth(t, auth.Config{Tickets: tickets})
	if _, err := open.Token(streamRequest("", "", "")); !errors.Is(err, auth.ErrNoCredential) {
		t.Fatalf("Token without a JWT key: %v, want ErrNoCredential", err)
	}
}
