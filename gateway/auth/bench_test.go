package auth_test

import (
	"context"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// benchVerify measures Subscriber on a request with a bearer token.
func benchVerify(b *testing.B, cfg auth.Config, tok string) {
	cfg.Now = replaytest.NewClock(t0).Now
	a := newAuth(b, cfg)
	r := streamRequest(tok, "", "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Subscriber(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyRS256(b *testing.B) {
	k := keys(b)
	path := writeFile(b, b.TempDir(), "rsa.pem", gatewaytest.PublicPEM(b, &k.rsa.PublicKey))
	benchVerify(b, auth.Config{KeyFiles: []string{path}},
		gatewaytest.SignWith(b, jwt.SigningMethodRS256, k.rsa, "", claims("u1", []string{"team-7.*"}, nil)))
}

func BenchmarkVerifyEd25519(b *testing.B) {
	k := keys(b)
	path := writeFile(b, b.TempDir(), "ed.pem", gatewaytest.PublicPEM(b, k.ed.Public()))
	benchVerify(b, auth.Config{KeyFiles: []string{path}},
		gatewaytest.SignWith(b, jwt.SigningMethodEdDSA, k.ed, "", claims("u1", []string{"team-7.*"}, nil)))
}

func BenchmarkVerifyHS256(b *testing.B) {
	benchVerify(b, auth.Config{HMACFile: hmacFile(b)},
		gatewaytest.SignWith(b, jwt.SigningMethodHS256, []byte(hmacSecret), "", claims("u1", []string{"team-7.*"}, nil)))
}
