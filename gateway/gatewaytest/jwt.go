package gatewaytest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Keys are signing keys for tests of access control, with their public halves
// written to files the gateway reads (--jwt-key, --jwt-hmac-file).
type Keys struct {
	RSA     *rsa.PrivateKey
	EC      *ecdsa.PrivateKey
	Ed25519 ed25519.PrivateKey
	HMAC    []byte

	// RSAFile, ECFile and Ed25519File hold the public keys as PEM; HMACFile holds
	// the HS256 secret.
	RSAFile, ECFile, Ed25519File, HMACFile string
}

// NewKeys makes fresh keys and writes their public halves under t.TempDir().
func NewKeys(t testing.TB) *Keys {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, dk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := &Keys{RSA: rk, EC: ek, Ed25519: dk, HMAC: []byte(Secret("an HS256 secret", rand.Text()+rand.Text()))}
	dir := t.TempDir()
	k.RSAFile = writePublicPEM(t, dir, "rsa.pem", &rk.PublicKey)
	k.ECFile = writePublicPEM(t, dir, "ec.pem", &ek.PublicKey)
	k.Ed25519File = writePublicPEM(t, dir, "ed25519.pem", dk.Public())
	k.HMACFile = filepath.Join(dir, "hmac.secret")
	if err := os.WriteFile(k.HMACFile, k.HMAC, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func writePublicPEM(t testing.TB, dir, name string, pub any) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, PublicPEM(t, pub), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// PublicPEM returns pub as a PKIX "PUBLIC KEY" PEM block, a key file as the gateway
// reads it.
func PublicPEM(t testing.TB, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Claims are a token's claims; Grants builds the roomcast claim.
type Claims = jwt.MapClaims

// Grants is the roomcast claim: what a token may subscribe to and publish to.
func Grants(subscribe, publish []string) map[string]any {
	g := map[string]any{}
	if subscribe != nil {
		g["subscribe"] = subscribe
	}
	if publish != nil {
		g["publish"] = publish
	}
	return g
}

// UserClaims are the claims of a typical token: sub, iat now, exp in ttl, the
// roomcast grants, and aud/iss when not empty.
func UserClaims(sub string, ttl time.Duration, subscribe, publish []string) Claims {
	now := time.Now()
	c := Claims{"sub": sub, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "roomcast": Grants(subscribe, publish)}
	return c
}

// Sign signs claims with the key for alg: RS256, PS256, ES256, EdDSA, HS256 or
// "none" (an unsigned token, which the gateway must refuse).
func (k *Keys) Sign(t testing.TB, alg string, claims Claims) string {
	t.Helper()
	var (
		method jwt.SigningMethod
		key    any
	)
	switch alg {
	case "RS256":
		method, key = jwt.SigningMethodRS256, k.RSA
	case "PS256":
		method, key = jwt.SigningMethodPS256, k.RSA
	case "ES256":
		method, key = jwt.SigningMethodES256, k.EC
	case "EdDSA":
		method, key = jwt.SigningMethodEdDSA, k.Ed25519
	case "HS256":
		method, key = jwt.SigningMethodHS256, k.HMAC
	case "none":
		method, key = jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType
	default:
		t.Fatalf("gatewaytest: no key for alg %q", alg)
	}
	return SignWith(t, method, key, "", claims)
}

// SignWith signs claims with method and key, naming kid in the header when it is not
// empty: for the tokens Sign does not make (a kid, a key of no Keys, a key used as
// what it is not, an algorithm the gateway refuses).
func SignWith(t testing.TB, method jwt.SigningMethod, key any, kid string, claims Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return Secret("a "+method.Alg()+" token", s)
}

// ClaimsOf reads a token's claims without verifying it.
func ClaimsOf(t testing.TB, token string) Claims {
	t.Helper()
	c := Claims{}
	if _, _, err := jwt.NewParser().ParseUnverified(token, c); err != nil {
		t.Fatal(err)
	}
	return c
}
