package auth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// fuzzAuth is an Authenticator with an RSA key, the HMAC secret, a cookie and tickets.
func fuzzAuth(f *testing.F) (*auth.Authenticator, *memTickets) {
	k := keys(f)
	c := replaytest.NewClock(t0)
	tickets := newMemTickets(c.Now)
	a := newAuth(f, auth.Config{
		KeyFiles: []string{writeFile(f, f.TempDir(), "rsa.pem", gatewaytest.PublicPEM(f, &k.rsa.PublicKey))},
		HMACFile: hmacFile(f), Cookie: "rc_token", Anonymous: auth.Grants{"public.*"},
		Tickets: tickets, Now: c.Now,
	})
	return a, tickets
}

// checkErr fails t unless err is nil or wraps ErrInvalid or ErrNoCredential.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, auth.ErrInvalid) && !errors.Is(err, auth.ErrNoCredential) {
		t.Fatalf("error %v wraps neither ErrInvalid nor ErrNoCredential", err)
	}
}

func rawRequest(query string, header http.Header) *http.Request {
	return &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/rooms/lobby/events", RawQuery: query}, Header: header}
}

func FuzzBearer(f *testing.F) {
	a, _ := fuzzAuth(f)
	k := keys(f)
	good := gatewaytest.SignWith(f, jwt.SigningMethodRS256, k.rsa, "", claims("u1", []string{"lobby"}, nil))
	for _, s := range []string{"Bearer " + good, "bearer   " + good + " ", "Bearer " + good[:len(good)-2], "Basic dTpw", "Bearer", "", "Bearer a.b.c", "Bearer ..", "Bearer eyJhbGciOiJub25lIn0.e30."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		p, err := a.Subscriber(context.Background(), rawRequest("", http.Header{"Authorization": {v}}))
		checkErr(t, err)
		if err != nil {
			return
		}
		switch p.Source {
		case auth.SourceAnonymous:
		case auth.SourceBearer:
			// Only a token signed by the test key can be accepted: its sub is ours.
			if p.Sub != "u1" || !p.CanSubscribe("lobby") {
				t.Fatalf("accepted %+v", p)
			}
			again, err := a.Subscriber(context.Background(), rawRequest("", http.Header{"Authorization": {v}}))
			if err != nil || again.Sub != p.Sub || !slices.Equal(again.Subscribe, p.Subscribe) {
				t.Fatalf("verifying again: %+v, %v", again, err)
			}
		default:
			t.Fatalf("source %q from an Authorization header", p.Source)
		}
	})
}

func FuzzCookie(f *testing.F) {
	a, _ := fuzzAuth(f)
	good := gatewaytest.SignWith(f, jwt.SigningMethodHS256, []byte(hmacSecret), "", claims("u1", []string{"lobby"}, nil))
	for _, s := range []string{"rc_token=" + good, "a=b; rc_token=" + good, "rc_token=", "rc_token=x.y.z", `rc_token="` + good + `"`, "rc_token=" + good + "; rc_token=x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		p, err := a.Subscriber(context.Background(), rawRequest("", http.Header{"Cookie": {v}}))
		checkErr(t, err)
		if err != nil {
			return
		}
		switch p.Source {
		case auth.SourceAnonymous:
		case auth.SourceCookie:
			if p.Sub != "u1" || !p.CanSubscribe("lobby") {
				t.Fatalf("accepted %+v", p)
			}
		default:
			t.Fatalf("source %q from a Cookie header", p.Source)
		}
	})
}

func FuzzTicketParam(f *testing.F) {
	a, _ := fuzzAuth(f)
	for range 3 {
		tk, err := a.IssueTicket(context.Background(), auth.Principal{Sub: "u1", Subscribe: auth.Grants{"lobby"}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add("ticket=" + tk.ID)
		f.Add("lastEventId=5&ticket=" + tk.ID)
	}
	for _, s := range []string{"", "ticket=", "ticket=a&ticket=b", "ticket=" + string(make([]byte, 43)), "t%69cket=AAAA", ";ticket=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		// A check (a HEAD) leaves the ticket for the redemption, and agrees with it.
		checked, checkedErr := a.CheckSubscriber(context.Background(), rawRequest(q, http.Header{}))
		checkErr(t, checkedErr)
		p, err := a.Subscriber(context.Background(), rawRequest(q, http.Header{}))
		checkErr(t, err)
		if (err == nil) != (checkedErr == nil) || err == nil && (checked.Sub != p.Sub || checked.Source != p.Source) {
			t.Fatalf("checked %+v, %v; redeemed %+v, %v", checked, checkedErr, p, err)
		}
		if err != nil {
			return
		}
		switch p.Source {
		case auth.SourceAnonymous:
		case auth.SourceTicket:
			if p.Sub != "u1" || !p.CanSubscribe("lobby") {
				t.Fatalf("redeemed %+v", p)
			}
			if _, err := a.Subscriber(context.Background(), rawRequest(q, http.Header{})); !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("a ticket redeemed twice: %v", err)
			}
		default:
			t.Fatalf("source %q from a query", p.Source)
		}
	})
}

// hsToken signs payload as is with the HMAC secret.
func hsToken(payload []byte) string {
	enc := base64.RawURLEncoding
	s := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(payload)
	m := hmac.New(sha256.New, []byte(hmacSecret))
	m.Write([]byte(s))
	return s + "." + enc.EncodeToString(m.Sum(nil))
}

func FuzzClaims(f *testing.F) {
	a, _ := fuzzAuth(f)
	for _, s := range []string{
		`{"sub":"u1","roomcast":{"subscribe":["team-7.*"],"publish":["lobby"]}}`,
		`{"sub":"u1","iat":1772366340,"exp":1772370000,"roomcast":{"subscribe":["team-7.*"],"publish":["lobby"]}}`,
		`{"sub":"u1","jti":"j","iat":1772366340,"exp":1772452740,"roomcast":{"subscribe":["*"]}}`,
		`{"sub":"u1","iat":1772366340,"exp":1772452741}`,
		`{"sub":"u1","iat":1772366340}`,
		`{"sub":"u1","roomcast":{"subscribe":"team-7.*"}}`,
		`{"sub":"u1","roomcast":null}`,
		`{"sub":"u1","roomcast":{"subscribe":["a*b"]}}`,
		`{"sub":1}`,
		`{"exp":1e30}`,
		`{"iat":"x"}`,
		`{"aud":["a",1]}`,
		`[]`,
		`{"sub":"u1","jti":"j","roomcast":{"subscribe":["*"],"publish":["*"],"x":1}}`,
		`{"sub":"u1","roomcast":{"clients":["anon:*","rig-0414"]}}`,
		`{"sub":"u1","roomcast":{"clients":[]}}`,
		`{"roomcast":{"clients":["*"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		tok := hsToken(payload)
		p, err := a.Subscriber(context.Background(), rawRequest("", http.Header{"Authorization": {"Bearer " + tok}}))
		checkErr(t, err)
		if err != nil {
			return
		}
		if p.Source != auth.SourceBearer || len(p.Sub) > 256 || !utf8.ValidString(p.Sub) || len(p.Subscribe) > 257 || len(p.Publish) > 256 {
			t.Fatalf("accepted %+v", p)
		}
		for _, g := range [][]auth.Pattern{p.Subscribe, p.Publish} {
			for _, pat := range g {
				if back, err := auth.ParsePattern(string(pat)); err != nil || back != pat {
					t.Fatalf("grant %q does not round-trip: %q, %v", pat, back, err)
				}
			}
		}
		for _, pat := range p.Clients {
			if back, err := auth.ParseClientPattern(string(pat)); err != nil || back != pat {
				t.Fatalf("client grant %q does not round-trip: %q, %v", pat, back, err)
			}
		}
		if p.Sub == "" && (p.Identity() != auth.AnonymousIdentity || p.CanClaim("rig") || !p.CanClaim("anon:rig")) {
			t.Fatalf("a token without sub claims as %q: %+v", p.Identity(), p)
		}
		var m map[string]any
		if json.Unmarshal(payload, &m) == nil {
			if sub, ok := m["sub"].(string); ok && sub != p.Sub {
				t.Fatalf("sub %q, principal says %q", sub, p.Sub)
			}
		}
	})
}

func FuzzTicketRequest(f *testing.F) {
	for _, s := range []string{
		`{"sub":"u1","subscribe":["team-7.*","lobby"]}`,
		`{"sub":"u1","subscribe":["lobby"],"exp":1900000000}`,
		`{"sub":"u1","subscribe":["lobby"],"exp":1}`,
		`{"sub":"u1","subscribe":["lobby"]} {}`,
		`{"sub":"u1","subscribe":["lobby"],"x":1}`,
		`{"sub":"\u00e9","subscribe":[]}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := auth.ParseTicketRequest(body, t0)
		if err != nil {
			if !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		req := auth.TicketRequest{Sub: p.Sub, Subscribe: []string{}}
		for _, pat := range p.Subscribe {
			req.Subscribe = append(req.Subscribe, string(pat))
		}
		if !p.Expires.IsZero() {
			req.Exp = p.Expires.Unix()
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		q, err := auth.ParseTicketRequest(again, t0)
		if err != nil || q.Sub != p.Sub || !slices.Equal(q.Subscribe, p.Subscribe) || !q.Expires.Equal(p.Expires) ||
			q.Source != auth.SourceTicket || !q.IssuedAt.Equal(t0) || !p.Expires.IsZero() && !p.Expires.After(t0) {
			t.Fatalf("%s accepted as %+v; again as %+v, %v", body, p, q, err)
		}
	})
}
