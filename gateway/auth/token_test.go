package auth_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// verifiers returns an Authenticator with an RSA, an ECDSA and an Ed25519 PEM key and
// the HMAC secret, audience and issuer set; and one with only the RSA key.
func verifiers(t *testing.T) (all, rsaOnly *auth.Authenticator, rsaPEM []byte) {
	k := keys(t)
	dir := t.TempDir()
	rsaPEM = gatewaytest.PublicPEM(t, &k.rsa.PublicKey)
	files := []string{
		writeFile(t, dir, "rsa.pem", rsaPEM),
		writeFile(t, dir, "ec.pem", gatewaytest.PublicPEM(t, &k.ec.PublicKey)),
		writeFile(t, dir, "ed.pem", gatewaytest.PublicPEM(t, k.ed.Public())),
	}
	c := replaytest.NewClock(t0)
	all = newAuth(t, auth.Config{
		KeyFiles: files, HMACFile: hmacFile(t),
		Audience: "roomcast", Issuer: "https://idp.example",
		Now: c.Now,
	})
	rsaOnly = newAuth(t, auth.Config{KeyFiles: files[:1], Now: c.Now})
	return all, rsaOnly, rsaPEM
}

func TestVerifyToken(t *testing.T) {
	k := keys(t)
	all, rsaOnly, rsaPEM := verifiers(t)
	good := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		c := claims("u1", []string{"team-7.*"}, []string{"team-7.a"})
		c["aud"] = []string{"other", "roomcast"}
		c["iss"] = "https://idp.example"
		c["jti"] = "tok-1"
		if mut != nil {
			mut(c)
		}
		return c
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, good(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	huge := good(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", 8<<10) })
	tests := []struct {
		name   string
		a      *auth.Authenticator
		token  string
		reason string // "" when the token is valid
	}{
		{"RS256", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(nil)), ""},
		{"RS512", all, gatewaytest.SignWith(t, jwt.SigningMethodRS512, k.rsa, "", good(nil)), ""},
		{"PS256", all, gatewaytest.SignWith(t, jwt.SigningMethodPS256, k.rsa, "", good(nil)), ""},
		{"ES256", all, gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec, "", good(nil)), ""},
		{"EdDSA", all, gatewaytest.SignWith(t, jwt.SigningMethodEdDSA, k.ed, "", good(nil)), ""},
		{"HS256", all, gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", good(nil)), ""},
		{"a kid no key names tries every key", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "some-kid", good(nil)), ""},
		{"alg none", all, none, "algorithm"},
		{"HS256 with the RSA public key as secret", all, gatewaytest.SignWith(t, jwt.SigningMethodHS256, rsaPEM, "", good(nil)), "signature"},
		{"HS256 without an HMAC secret", rsaOnly, gatewaytest.SignWith(t, jwt.SigningMethodHS256, rsaPEM, "", good(nil)), "algorithm"},
		{"HS384 with the right secret", all, gatewaytest.SignWith(t, jwt.SigningMethodHS384, []byte(hmacSecret), "", good(nil)), "algorithm"},
		{"ES384 header on a P-256 key", all, esWrongAlg(t), "algorithm"},
		{"wrong RSA key", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa2, "", good(nil)), "signature"},
		{"wrong ECDSA key", all, gatewaytest.SignWith(t, jwt.SigningMethodES256, k.ec2, "", good(nil)), "signature"},
		{"wrong HMAC secret", all, gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(strings.Repeat("z", 40)), "", good(nil)), "signature"},
		{"expired", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["exp"] = t0.Add(-6 * time.Second).Unix() })), "expired"},
		{"expired within the leeway", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["exp"] = t0.Add(-4 * time.Second).Unix() })), ""},
		{"nbf in the future", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["nbf"] = t0.Add(6 * time.Second).Unix() })), "not valid yet"},
		{"nbf within the leeway", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["nbf"] = t0.Add(4 * time.Second).Unix() })), ""},
		{"iat in the future", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["iat"] = t0.Add(time.Minute).Unix() })), "issued in the future"},
		{"no exp", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { delete(c, "exp") })), "no exp"},
		{"no iat", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { delete(c, "iat") })), "no iat"},
		{"exp - iat the max token age", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) {
			c["exp"] = t0.Add(-time.Minute + auth.DefaultMaxTokenAge).Unix()
		})), ""},
		{"exp - iat beyond the max token age", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) {
			c["exp"] = t0.Add(-time.Minute + auth.DefaultMaxTokenAge + time.Second).Unix()
		})), "max token age"},
		{"wrong aud", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["aud"] = "other" })), "audience"},
		{"no aud", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { delete(c, "aud") })), "audience"},
		{"wrong iss", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), "issuer"},
		{"roomcast claim not an object", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["roomcast"] = "all" })), "roomcast"},
		{"roomcast claim with a bad pattern", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) {
			c["roomcast"] = map[string]any{"subscribe": []string{"team-*.a"}}
		})), "pattern"},
		{"sub too long", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("u", 257) })), "sub"},
		{"over 8 KiB", all, gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", huge), "8 KiB"},
		{"not a JWT", all, "not-a-jwt", "malformed"},
		{"tampered payload", all, tamper(gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", good(nil))), "signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.a.Subscriber(t.Context(), streamRequest(tt.token, "", ""))
			if tt.reason != "" {
				if !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("error = %v; want ErrInvalid saying %q", err, tt.reason)
				}
				if strings.Contains(err.Error(), tt.token) {
					t.Fatalf("error %q contains the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Subscriber: %v", err)
			}
			if p.Source != auth.SourceBearer || p.Sub != "u1" || p.JTI != "tok-1" || !p.IssuedAt.Equal(t0.Add(-time.Minute)) {
				t.Fatalf("principal = %+v; want sub u1, jti tok-1, iat t0-1m, source bearer", p)
			}
		})
	}
}

// TestRevokedUserNeverComesBack: a revocation is kept for the max token age (plus the
// leeway), and no token lives longer (exp - iat), nor lacks exp or iat: when it
// lapses, every token of the user issued before it has expired.
func TestRevokedUserNeverComesBack(t *testing.T) {
	const maxAge = time.Hour
	c := replaytest.NewClock(t0)
	a := newAuth(t, auth.Config{HMACFile: hmacFile(t), MaxTokenAge: maxAge, Now: c.Now})
	tok := func(mut func(jwt.MapClaims)) string {
		cl := claims("u1", []string{"lobby"}, nil)
		cl["iat"] = t0.Unix()
		mut(cl)
		return gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", cl)
	}
	tokens := map[string]string{
		"no exp":          tok(func(cl jwt.MapClaims) { delete(cl, "exp") }),
		"no iat":          tok(func(cl jwt.MapClaims) { delete(cl, "iat"); cl["exp"] = t0.Add(2 * maxAge).Unix() }),
		"longer than max": tok(func(cl jwt.MapClaims) { cl["exp"] = t0.Add(2 * maxAge).Unix() }),
		"as long as max":  tok(func(cl jwt.MapClaims) { cl["exp"] = t0.Add(maxAge).Unix() }),
	}
	if err := a.Revoke(t.Context(), "sub", "u1", maxAge); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{time.Second, maxAge, maxAge + auth.DefaultLeeway + time.Millisecond, 3 * maxAge} {
		c.Advance(t0.Add(at).Sub(c.Now()))
		for name, token := range tokens {
			if p, err := a.Subscriber(t.Context(), streamRequest(token, "", "")); !errors.Is(err, auth.ErrInvalid) {
				t.Errorf("t0+%s: the token %s of the revoked user: %+v, %v; want it refused", at, name, p, err)
			}
		}
	}
	if a.Revoked(auth.Principal{Sub: "u1"}) {
		t.Fatal("the revocation is still in force after the max token age and the leeway")
	}
}

func TestNewRejectsBadLifetimes(t *testing.T) {
	for name, cfg := range map[string]auth.Config{
		"negative max token age":      {MaxTokenAge: -time.Second},
		"ticket TTL beyond the max":   {MaxTokenAge: time.Minute, TicketTTL: 2 * time.Minute},
		"ticket TTL beyond a default": {TicketTTL: auth.DefaultMaxTokenAge + time.Second},
	} {
		if a, err := auth.New(cfg); err == nil {
			a.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

// esWrongAlg is an ES384 token signed with a P-256 key: the algorithm does not fit the curve.
func esWrongAlg(t *testing.T) string {
	k := keys(t)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims("u1", nil, nil))
	tok.Header["alg"] = "ES384"
	s, err := tok.SigningString()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := jwt.SigningMethodES256.Sign(s, k.ec)
	if err != nil {
		t.Fatal(err)
	}
	return s + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// tamper flips one character of the signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	b := []byte(parts[2])
	if b[10] == 'A' {
		b[10] = 'B'
	} else {
		b[10] = 'A'
	}
	parts[2] = string(b)
	return strings.Join(parts, ".")
}

func TestTokenGrants(t *testing.T) {
	k := keys(t)
	dir := t.TempDir()
	a := newAuth(t, auth.Config{
		KeyFiles:  []string{writeFile(t, dir, "rsa.pem", gatewaytest.PublicPEM(t, &k.rsa.PublicKey))},
		Anonymous: auth.Grants{"public.*"},
		Now:       replaytest.NewClock(t0).Now,
	})
	tok := gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", claims("u1", []string{"team-7.*"}, []string{"team-7.a"}))
	p, err := a.Subscriber(t.Context(), streamRequest(tok, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Expires.Equal(t0.Add(time.Hour)) {
		t.Errorf("Expires = %v, want %v", p.Expires, t0.Add(time.Hour))
	}
	tests := []struct {
		room               string
		subscribe, publish bool
	}{
		{"team-7.a", true, true},
		{"team-7.b", true, false},
		{"team-70", false, false},
		{"team-7", false, false},
		{"public.news", true, false}, // what anonymous may read, a credential may read too
		{"lobby", false, false},
	}
	for _, tt := range tests {
		if got := p.CanSubscribe(tt.room); got != tt.subscribe {
			t.Errorf("CanSubscribe(%q) = %v, want %v", tt.room, got, tt.subscribe)
		}
		if got := p.CanPublish(tt.room); got != tt.publish {
			t.Errorf("CanPublish(%q) = %v, want %v", tt.room, got, tt.publish)
		}
	}
	// Without a roomcast claim a token names a user who may read only what anonymous may.
	bare := gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "", jwt.MapClaims{"sub": "u2", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	p, err = a.Subscriber(t.Context(), streamRequest(bare, "", ""))
	if err != nil || p.Sub != "u2" || p.CanSubscribe("team-7.a") || !p.CanSubscribe("public.x") || p.CanPublish("public.x") {
		t.Fatalf("token without claim: %+v, %v", p, err)
	}
}

func TestNewRejectsBadFiles(t *testing.T) {
	k := keys(t)
	dir := t.TempDir()
	small, err := rsaKey(1024)
	if err != nil {
		t.Fatal(err)
	}
	secretLooking := "-----BEGIN PUBLIC KEY-----\nU0VDUkVUU1RVRkZTRUNSRVRTVFVGRg==\n-----END PUBLIC KEY-----\n"
	tests := []struct {
		name string
		cfg  auth.Config
	}{
		{"missing key file", auth.Config{KeyFiles: []string{dir + "/absent.pem"}}},
		{"garbage PEM", auth.Config{KeyFiles: []string{writeFile(t, dir, "bad.pem", []byte(secretLooking))}}},
		{"no key in file", auth.Config{KeyFiles: []string{writeFile(t, dir, "empty.pem", []byte("hello\n"))}}},
		{"private key PEM", auth.Config{KeyFiles: []string{writeFile(t, dir, "priv.pem", privatePEM(t, k))}}},
		{"RSA under 2048 bits", auth.Config{KeyFiles: []string{writeFile(t, dir, "small.pem", gatewaytest.PublicPEM(t, &small.PublicKey))}}},
		{"JWKS with a symmetric key", auth.Config{KeyFiles: []string{writeFile(t, dir, "oct.json", []byte(`{"keys":[{"kty":"oct","k":"U0VDUkVUU1RVRkZTRUNSRVRTVFVGRlNFQ1JFVFNUVUZG"}]}`))}}},
		{"JWKS not JSON", auth.Config{KeyFiles: []string{writeFile(t, dir, "bad.json", []byte(`{"keys":[SECRETSTUFF`))}}},
		{"short HMAC secret", auth.Config{HMACFile: writeFile(t, dir, "short", []byte("SECRETSTUFF-short\n"))}},
		{"missing HMAC file", auth.Config{HMACFile: dir + "/absent"}},
		{"empty publish key", auth.Config{PublishKeys: []string{" "}}},
		{"negative leeway", auth.Config{Leeway: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := auth.New(tt.cfg)
			if err == nil {
				a.Close()
				t.Fatal("New succeeded")
			}
			if strings.Contains(err.Error(), "SECRETSTUFF") || strings.Contains(err.Error(), "U0VDUkVU") {
				t.Fatalf("error %q shows the file's content", err)
			}
			for _, f := range append(tt.cfg.KeyFiles, tt.cfg.HMACFile) {
				if f != "" && !strings.Contains(err.Error(), f) {
					t.Fatalf("error %q does not name %s", err, f)
				}
			}
		})
	}
}

func privatePEM(t *testing.T, k testKeys) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k.ec)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestKeyFileForms(t *testing.T) {
	k := keys(t)
	dir := t.TempDir()
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)})
	tests := []struct {
		name string
		file []byte
	}{
		{"PKIX", gatewaytest.PublicPEM(t, &k.rsa.PublicKey)},
		{"PKCS1", pkcs1},
		{"certificate", certPEM(t, k)},
		{"JWKS", jwks(t, jwksKey{"k1", &k.rsa.PublicKey})},
		{"single JWK", singleJWK(t, "k1", &k.rsa.PublicKey)},
	}
	tok := gatewaytest.SignWith(t, jwt.SigningMethodRS256, k.rsa, "k1", claims("u1", nil, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAuth(t, auth.Config{KeyFiles: []string{writeFile(t, dir, tt.name, tt.file)}, Now: replaytest.NewClock(t0).Now})
			if p, err := a.Subscriber(t.Context(), streamRequest(tok, "", "")); err != nil || p.Sub != "u1" {
				t.Fatalf("Subscriber = %+v, %v", p, err)
			}
		})
	}
}
