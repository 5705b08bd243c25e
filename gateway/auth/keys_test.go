package auth_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func rsaKey(bits int) (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, bits) }

func certPEM(t *testing.T, k testKeys) []byte {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "idp"},
		NotBefore:    t0.Add(-time.Hour),
		NotAfter:     t0.Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.rsa.PublicKey, k.rsa)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

type jwksKey struct {
	kid string
	pub crypto.PublicKey
}

func jwkOf(t testing.TB, kid string, pub crypto.PublicKey) jwk.Key {
	t.Helper()
	key, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	return key
}

// jwks returns a JWKS document holding the public keys.
func jwks(t testing.TB, ks ...jwksKey) []byte {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range ks {
		if err := set.AddKey(jwkOf(t, k.kid, k.pub)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func singleJWK(t *testing.T, kid string, pub crypto.PublicKey) []byte {
	b, err := json.Marshal(jwkOf(t, kid, pub))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyBearer checks tok as a stream's bearer token.
func verifyBearer(a *auth.Authenticator, tok string) error {
	_, err := a.Subscriber(context.Background(), streamRequest(tok, "", ""))
	return err
}

// awaitRotation waits until the periodic check has read a rewritten key file: next
// verifies and old is refused.
func awaitRotation(t *testing.T, a *auth.Authenticator, old, next string) {
	t.Helper()
	replaytest.Eventually(t, 10*time.Second, "rotation", func() error {
		if err := verifyBearer(a, next); err != nil {
			return err
		}
		if err := verifyBearer(a, old); !errors.Is(err, auth.ErrInvalid) {
			return errors.New("the old key still verifies")
		}
		return nil
	})
}

// TestKeyRotation: a JWKS file rewritten with a new key is picked up by the periodic
// check, so the new key's tokens verify and the old key's are refused, without a restart.
func TestKeyRotation(t *testing.T) {
	k := keys(t)
	path := writeFile(t, t.TempDir(), "jwks.json", jwks(t, jwksKey{"k1", &k.rsa.PublicKey}))
	a := newAuth(t, auth.Config{KeyFiles: []string{path}, ReloadEvery: 10 * time.Millisecond, Now: replaytest.NewClock(t0).Now})
	old := gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "k1", claims("u1", nil, nil))
	next := gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec, "k2", claims("u2", nil, nil))
	if err := verifyBearer(a, old); err != nil {
		t.Fatalf("old key before rotation: %v", err)
	}
	replaceFile(t, path, jwks(t, jwksKey{"k2", &k.ec.PublicKey}))
	awaitRotation(t, a, old, next)
}

// TestUnknownKidReloads: a token naming a kid no key has makes the files be read again
// at once (at most once a second), without waiting for the periodic check.
func TestUnknownKidReloads(t *testing.T) {
	k := keys(t)
	path := writeFile(t, t.TempDir(), "jwks.json", jwks(t, jwksKey{"k1", &k.rsa.PublicKey}))
	a := newAuth(t, auth.Config{KeyFiles: []string{path}, ReloadEvery: time.Hour, Now: replaytest.NewClock(t0).Now})
	replaceFile(t, path, jwks(t, jwksKey{"k1", &k.rsa.PublicKey}, jwksKey{"k2", &k.ec.PublicKey}))
	next := gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec, "k2", claims("u2", nil, nil))
	if p, err := a.Subscriber(t.Context(), streamRequest(next, "", "")); err != nil || p.Sub != "u2" {
		t.Fatalf("token of a key added since: %+v, %v", p, err)
	}
	// A kid that names a key of the wrong type is refused, not tried on other keys.
	wrongType := gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "k2", claims("u1", nil, nil))
	if _, err := a.Subscriber(t.Context(), streamRequest(wrongType, "", "")); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("RS256 token naming an ECDSA key: %v", err)
	}
}

// warnings is a slog handler that sends each warning's message on a channel.
type warnings struct{ ch chan string }

func (w warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		w.ch <- b.String()
	}
	return nil
}
func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }

// TestBadRewriteKeepsKeys: a key file that becomes invalid keeps the last good keys and
// logs a warning that names the file but shows none of its content.
func TestBadRewriteKeepsKeys(t *testing.T) {
	k := keys(t)
	path := writeFile(t, t.TempDir(), "jwks.json", jwks(t, jwksKey{"k1", &k.rsa.PublicKey}))
	w := warnings{ch: make(chan string, 16)}
	a := newAuth(t, auth.Config{KeyFiles: []string{path}, ReloadEvery: 10 * time.Millisecond,
		Now: replaytest.NewClock(t0).Now, Logger: slog.New(w)})
	replaceFile(t, path, []byte(`{"keys":[{"kty":"RSA","n":"SECRETSTUFF"`))
	select {
	case msg := <-w.ch:
		if !strings.Contains(msg, path) || strings.Contains(msg, "SECRETSTUFF") {
			t.Fatalf("warning %q: want the path and none of the content", msg)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no warning for a broken key file")
	}
	tok := gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "k1", claims("u1", nil, nil))
	if _, err := a.Subscriber(t.Context(), streamRequest(tok, "", "")); err != nil {
		t.Fatalf("the last good key: %v", err)
	}
	// A file that goes away keeps its keys too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-w.ch:
		if !strings.Contains(msg, path) {
			t.Fatalf("warning %q does not name the file", msg)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no warning for a missing key file")
	}
	if _, err := a.Subscriber(t.Context(), streamRequest(tok, "", "")); err != nil {
		t.Fatalf("the last good key of a missing file: %v", err)
	}
}

// TestKeyRotationPEM: a PEM file rewritten with a key of another type is picked up by
// the periodic check alone (a token without kid forces no reload).
func TestKeyRotationPEM(t *testing.T) {
	k := keys(t)
	path := writeFile(t, t.TempDir(), "key.pem", gatewaytest.PublicPEM(t, &k.rsa.PublicKey))
	a := newAuth(t, auth.Config{KeyFiles: []string{path}, ReloadEvery: 10 * time.Millisecond, Now: replaytest.NewClock(t0).Now})
	old := gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", claims("u1", nil, nil))
	next := gatewaytest.SignWith(t, jwt.SigningMethodEdDSA, k.ed, "", claims("u2", nil, nil))
	if err := verifyBearer(a, next); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("the next key before rotation: %v", err)
	}
	replaceFile(t, path, gatewaytest.PublicPEM(t, k.ed.Public()))
	awaitRotation(t, a, old, next)
}

// TestJWKSKeySelection: a kid picks its key; a token without kid tries every key that
// fits its algorithm; a JWK's alg narrows what its key verifies.
func TestJWKSKeySelection(t *testing.T) {
	k := keys(t)
	rsaJWK := jwkOf(t, "k1", &k.rsa.PublicKey)
	if err := rsaJWK.Set(jwk.AlgorithmKey, "RS256"); err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	for _, key := range []jwk.Key{rsaJWK, jwkOf(t, "k2", &k.ec.PublicKey), jwkOf(t, "k3", &k.ec2.PublicKey)} {
		if err := set.AddKey(key); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, auth.Config{KeyFiles: []string{writeFile(t, t.TempDir(), "jwks.json", doc)}, Now: replaytest.NewClock(t0).Now})
	tests := []struct {
		name   string
		token  string
		reason string
	}{
		{"RS256 by kid", gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "k1", claims("u1", nil, nil)), ""},
		{"ES256 by kid", gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec2, "k3", claims("u1", nil, nil)), ""},
		{"ES256 without kid tries both EC keys", gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec2, "", claims("u1", nil, nil)), ""},
		{"RS256 without kid", gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", claims("u1", nil, nil)), ""},
		{"PS256 on a key whose JWK says RS256", gatewaytest.SignWith(t, jwt.SigningMethodPS256, k.rsa, "k1", claims("u1", nil, nil)), "algorithm"},
		{"ES256 naming the RSA key", gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec, "k1", claims("u1", nil, nil)), "no key"},
		{"ES256 naming the other EC key", gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec, "k3", claims("u1", nil, nil)), "signature"},
		{"unknown kid", gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec, "k9", claims("u1", nil, nil)), "no key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Subscriber(t.Context(), streamRequest(tt.token, "", ""))
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("error = %v; want ErrInvalid saying %q", err, tt.reason)
			}
		})
	}
}
