package auth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestVerifiedTokensStillEndAndCanBeRevoked: a token presented again is not
// verified again, but it still ends at its exp (plus the leeway), a revocation
// still refuses it, and each use gets its own source. (Key rotation is
// TestKeyRotation: the old key's token verified before the rotation is refused
// after it.)
func TestVerifiedTokensStillEndAndCanBeRevoked(t *testing.T) {
	c := replaytest.NewClock(t0)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), Cookie: "rc_token", Leeway: 5 * time.Second, Now: c.Now})
	cl := claims("u1", []string{"lobby"}, nil)
	cl["exp"] = t0.Add(30 * time.Second).Unix()
	cl["jti"] = "j-1"
	tok := gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", cl)

	for i, src := range []auth.Source{auth.SourceBearer, auth.SourceCookie, auth.SourceBearer} {
		r := streamRequest(tok, "", "")
		if src == auth.SourceCookie {
			r = streamRequest("", tok, "")
		}
		p, err := a.Subscriber(context.Background(), r)
		if err != nil || p.Source != src || p.Sub != "u1" || !p.CanSubscribe("lobby") {
			t.Fatalf("use %d: %+v, %v; want u1 from %s", i, p, err, src)
		}
	}

	c.Advance(34 * time.Second) // within exp + leeway
	if err := verifyBearer(a, tok); err != nil {
		t.Fatalf("inside the leeway: %v", err)
	}
	c.Advance(2 * time.Second) // past exp + leeway, long before the cache would forget it
	if err := verifyBearer(a, tok); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("past exp: %v, want ErrInvalid", err)
	}

	again := gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", claims("u2", []string{"lobby"}, nil))
	if err := verifyBearer(a, again); err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke(t.Context(), "sub", "u2", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := verifyBearer(a, again); !errors.Is(err, auth.ErrRevoked) {
		t.Fatalf("a verified token after its user's revocation: %v, want ErrRevoked", err)
	}
}
