package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// subscriberSetup is an Authenticator with the HMAC secret, a cookie, anonymous grants
// and tickets; and a ticket for sub "by-ticket".
func subscriberSetup(t *testing.T) (a *auth.Authenticator, ticket string, tickets *memTickets) {
	c := replaytest.NewClock(t0)
	tickets = newMemTickets(c.Now)
	a = newAuth(t, auth.Config{
		HMACFile: hmacFile(t), Cookie: "rc_token", Anonymous: auth.Grants{"public.*"},
		Tickets: tickets, Now: c.Now,
	})
	tk, err := a.IssueTicket(t.Context(), auth.Principal{Sub: "by-ticket", Subscribe: auth.Grants{"lobby"}, Source: auth.SourceBearer})
	if err != nil {
		t.Fatal(err)
	}
	return a, tk.ID, tickets
}

func hs(t *testing.T, sub string) string {
	return gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", claims(sub, []string{"lobby"}, nil))
}

func TestSubscriberPrecedence(t *testing.T) {
	const badTicket = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // well formed, never issued
	tests := []struct {
		name                   string
		bearer, cookie, ticket string // "good" or "bad" or ""
		wantSub                string
		wantSource             auth.Source
		wantErr                error
	}{
		{"bearer wins over cookie and ticket", "good", "good", "good", "by-bearer", auth.SourceBearer, nil},
		{"cookie wins over ticket", "", "good", "good", "by-cookie", auth.SourceCookie, nil},
		{"ticket alone", "", "", "good", "by-ticket", auth.SourceTicket, nil},
		{"bad bearer never falls to the cookie", "bad", "good", "", "", "", auth.ErrInvalid},
		{"bad bearer never falls to the ticket", "bad", "", "good", "", "", auth.ErrInvalid},
		{"bad bearer never falls to anonymous", "bad", "", "", "", "", auth.ErrInvalid},
		{"bad cookie never falls to the ticket", "", "bad", "good", "", "", auth.ErrInvalid},
		{"bad cookie never falls to anonymous", "", "bad", "", "", "", auth.ErrInvalid},
		{"unknown ticket never falls to anonymous", "", "", "bad", "", "", auth.ErrInvalid},
		{"nothing is anonymous", "", "", "", "", auth.SourceAnonymous, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ticket, _ := subscriberSetup(t)
			pick := func(kind, good, bad string) string {
				switch kind {
				case "good":
					return good
				case "bad":
					return bad
				}
				return ""
			}
			r := streamRequest(
				pick(tt.bearer, hs(t, "by-bearer"), tamper(hs(t, "by-bearer"))),
				pick(tt.cookie, hs(t, "by-cookie"), "not.a.jwt"),
				pick(tt.ticket, ticket, badTicket))
			p, err := a.Subscriber(t.Context(), r)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || p.Sub != tt.wantSub || p.Source != tt.wantSource {
				t.Fatalf("Subscriber = %+v, %v; want sub %q source %q", p, err, tt.wantSub, tt.wantSource)
			}
		})
	}
}

func TestSubscriberAnonymous(t *testing.T) {
	open := newAuth(t, auth.Config{})
	p, err := open.Subscriber(t.Context(), streamRequest("", "", ""))
	if err != nil || p.Source != auth.SourceAnonymous || !p.CanSubscribe("any-room") || !p.Expires.IsZero() || open.Enabled() {
		t.Fatalf("open mode: %+v, %v", p, err)
	}
	closed := newAuth(t, auth.Config{HMACFile: hmacFile(t), Anonymous: auth.Grants{"public.*"}})
	p, err = closed.Subscriber(t.Context(), streamRequest("", "", ""))
	if err != nil || p.Source != auth.SourceAnonymous || !p.CanSubscribe("public.a") || p.CanSubscribe("lobby") || !closed.Enabled() {
		t.Fatalf("with keys: %+v, %v", p, err)
	}
	none := newAuth(t, auth.Config{HMACFile: hmacFile(t)})
	p, err = none.Subscriber(t.Context(), streamRequest("", "", ""))
	if err != nil || p.CanSubscribe("public.a") {
		t.Fatalf("with keys and no anonymous rooms: %+v, %v", p, err)
	}
}

func TestSubscriberHeaders(t *testing.T) {
	a, _, tickets := subscriberSetup(t)
	good := hs(t, "u1")
	req := func(mut func(r *http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/rooms/lobby/events", nil)
		mut(r)
		return r
	}
	tests := []struct {
		name    string
		r       *http.Request
		wantErr bool
		wantSrc auth.Source
	}{
		{"lowercase scheme", req(func(r *http.Request) { r.Header.Set("Authorization", "bearer "+good) }), false, auth.SourceBearer},
		{"basic scheme", req(func(r *http.Request) { r.Header.Set("Authorization", "Basic dTpw") }), true, ""},
		{"scheme alone", req(func(r *http.Request) { r.Header.Set("Authorization", "Bearer") }), true, ""},
		{"two authorization headers", req(func(r *http.Request) {
			r.Header.Add("Authorization", "Bearer "+good)
			r.Header.Add("Authorization", "Bearer "+good)
		}), true, ""},
		{"empty authorization header", req(func(r *http.Request) { r.Header.Set("Authorization", "") }), false, auth.SourceAnonymous},
		{"other cookies only", req(func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "other", Value: good}) }), false, auth.SourceAnonymous},
		{"empty cookie", req(func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "rc_token", Value: ""}) }), false, auth.SourceAnonymous},
		{"cookie among others", req(func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: "a", Value: "1"})
			r.AddCookie(&http.Cookie{Name: "rc_token", Value: good})
		}), false, auth.SourceCookie},
		{"cookie header over the bound", req(func(r *http.Request) {
			r.AddCookie(&http.Cookie{Name: "pad", Value: strings.Repeat("p", 17<<10)})
			r.AddCookie(&http.Cookie{Name: "rc_token", Value: good})
		}), true, ""},
		{"two tickets", httptest.NewRequest(http.MethodGet, "/x?ticket=a&ticket=b", nil), true, ""},
		{"empty ticket", httptest.NewRequest(http.MethodGet, "/x?ticket=", nil), true, ""},
		{"short ticket", httptest.NewRequest(http.MethodGet, "/x?ticket=AAAA", nil), true, ""},
		{"ticket with padding", httptest.NewRequest(http.MethodGet, "/x?ticket=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", nil), true, ""},
		{"ticket of 43 bad characters", httptest.NewRequest(http.MethodGet, "/x?ticket="+strings.Repeat("%2B", 43), nil), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tickets.Takes()
			p, err := a.Subscriber(context.Background(), tt.r)
			if tt.wantErr {
				if !errors.Is(err, auth.ErrInvalid) {
					t.Fatalf("error = %v, want ErrInvalid", err)
				}
			} else if err != nil || p.Source != tt.wantSrc {
				t.Fatalf("Subscriber = %+v, %v; want source %q", p, err, tt.wantSrc)
			}
			if tickets.Takes() != before {
				t.Fatal("a malformed ticket reached the store")
			}
		})
	}
}

// TestCookieNotConfigured: without Config.Cookie no cookie is read.
func TestCookieNotConfigured(t *testing.T) {
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t)})
	p, err := a.Subscriber(t.Context(), streamRequest("", hs(t, "u1"), ""))
	if err != nil || p.Source != auth.SourceAnonymous {
		t.Fatalf("Subscriber = %+v, %v; want anonymous", p, err)
	}
}
