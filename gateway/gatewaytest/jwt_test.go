package gatewaytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestPublicPEM: the block is a PKIX public key that parses back to the key.
func TestPublicPEM(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(PublicPEM(t, &k.PublicKey))
	if block == nil || block.Type != "PUBLIC KEY" || len(rest) != 0 {
		t.Fatalf("block %+v, %d bytes after it", block, len(rest))
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !k.PublicKey.Equal(pub) {
		t.Fatal("the PEM holds another key")
	}
}

// TestSignWith: a token signed with a given method and key verifies with that key,
// names kid only when asked, and carries the claims.
func TestSignWith(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{"", "k1"} {
		tok := SignWith(t, jwt.SigningMethodES256, k, kid, Claims{"sub": "u1"})
		c := Claims{}
		parsed, err := jwt.ParseWithClaims(tok, c, func(*jwt.Token) (any, error) { return &k.PublicKey, nil },
			jwt.WithValidMethods([]string{"ES256"}))
		if err != nil {
			t.Fatalf("kid %q: %v", kid, err)
		}
		if got, ok := parsed.Header["kid"]; kid == "" && ok || kid != "" && got != kid {
			t.Fatalf("kid %q: header kid %v", kid, got)
		}
		if c["sub"] != "u1" {
			t.Fatalf("claims %v", c)
		}
	}
}
