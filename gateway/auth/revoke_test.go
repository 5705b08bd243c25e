package auth_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestRevokeBySub(t *testing.T) {
	c := replaytest.NewClock(t0)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Now: c.Now})
	tok := func(sub string, iat time.Time) string {
		cl := claims(sub, []string{"lobby"}, nil)
		cl["iat"] = iat.Unix()
		return gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", cl)
	}
	older := tok("u1", t0.Add(-time.Minute))
	sameSecond := tok("u1", t0)
	other := tok("u2", t0.Add(-time.Minute))
	if err := a.Revoke(t.Context(), "sub", "u1", time.Hour); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Second)
	newer := tok("u1", c.Now())
	tests := []struct {
		name    string
		token   string
		refused bool
	}{
		{"older token", older, true},
		{"token of the revocation's second", sameSecond, true},
		{"newer token", newer, false},
		{"another user", other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Subscriber(t.Context(), streamRequest(tt.token, "", ""))
			if tt.refused {
				if !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), "revoked") {
					t.Fatalf("error = %v, want ErrInvalid saying revoked", err)
				}
				return
			}
			if err != nil || a.Revoked(p) {
				t.Fatalf("Subscriber = %+v, %v", p, err)
			}
		})
	}
	// The revocation lapses after maxAge (plus the leeway): by then every token it refused has expired.
	c.Advance(time.Hour + 10*time.Second)
	if a.Revoked(auth.Principal{Sub: "u1"}) {
		t.Fatal("revocation still in force after its maxAge")
	}
}

func TestRevokeByJTI(t *testing.T) {
	c := replaytest.NewClock(t0)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Now: c.Now})
	cl := claims("u1", []string{"lobby"}, nil)
	cl["jti"] = "tok-1"
	one := gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", cl)
	cl["jti"] = "tok-2"
	two := gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", cl)
	if err := a.Revoke(t.Context(), "jti", "tok-1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Subscriber(t.Context(), streamRequest(one, "", "")); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("revoked jti: %v", err)
	}
	if _, err := a.Subscriber(t.Context(), streamRequest(two, "", "")); err != nil {
		t.Fatalf("another jti: %v", err)
	}
	c.Advance(24*time.Hour - time.Minute) // maxAge 0 means 24h
	if !a.Revoked(auth.Principal{JTI: "tok-1"}) {
		t.Fatal("jti revocation lapsed before 24h")
	}
}

func TestRevokeBadInput(t *testing.T) {
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t)})
	for _, tt := range []struct{ kind, value string }{
		{"user", "u1"}, {"sub", ""}, {"sub", strings.Repeat("u", 257)}, {"jti", "\xff"},
	} {
		if err := a.Revoke(t.Context(), tt.kind, tt.value, time.Hour); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("Revoke(%q, %q) = %v, want ErrInvalid", tt.kind, tt.value, err)
		}
	}
	if err := a.Revoke(t.Context(), "sub", "u1", -time.Hour); err == nil {
		t.Error("a negative maxAge was accepted")
	}
}

// TestRevokeFleet: a revocation on one pod reaches every pod's watchers and refuses the
// credential there; each watcher hears of it once; tickets issued before are refused.
func TestRevokeFleet(t *testing.T) {
	c := replaytest.NewClock(t0)
	shared := &memRevocations{}
	tickets := newMemTickets(c.Now)
	pods := make([]*auth.Authenticator, 2)
	var mu sync.Mutex
	heard := map[int][]replay.Revocation{}
	for i := range pods {
		pods[i] = newAuth(t, auth.Config{HMACFile: hmacFile(t), Revocations: shared, Tickets: tickets, Now: c.Now})
		pods[i].OnRevoke(func(r replay.Revocation) {
			mu.Lock()
			heard[i] = append(heard[i], r)
			mu.Unlock()
		})
		pods[i].Start()
	}
	p := auth.Principal{Sub: "u1", IssuedAt: t0.Add(-time.Minute), Subscribe: auth.Grants{"lobby"}}
	tk, err := pods[1].IssueTicket(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := pods[0].Revoke(t.Context(), "sub", "u1", time.Hour); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for i := range pods {
		if len(heard[i]) != 1 || heard[i][0].Kind != "sub" || heard[i][0].Value != "u1" ||
			!heard[i][0].At.Equal(t0) || !heard[i][0].Until.After(t0.Add(time.Hour)) {
			t.Errorf("pod %d heard %+v; want one sub u1 revocation at t0 until past t0+1h", i, heard[i])
		}
	}
	mu.Unlock()
	if !pods[1].Revoked(p) {
		t.Fatal("the other pod does not refuse the revoked user")
	}
	if _, err := pods[1].Subscriber(t.Context(), streamRequest("", "", tk.ID)); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("ticket of a revoked user: %v", err)
	}
	// A pod that starts later learns the revocations in force.
	late := newAuth(t, auth.Config{HMACFile: hmacFile(t), Revocations: shared, Now: c.Now})
	late.Start()
	if !late.Revoked(p) {
		t.Fatal("a pod started later does not know the revocation")
	}
}
