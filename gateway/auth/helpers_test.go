package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the injected clock's start in every test.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hmacSecret is the HS256 secret of the tests (32 bytes and more).
const hmacSecret = "a-test-secret-that-is-long-enough-for-hs256"

// testKeys are made once per test binary (RSA generation is slow under -race): the
// keys of one gatewaytest.NewKeys, and the RSA and ECDSA keys of a second one (a
// wrong key, or a second key of a set).
type testKeys struct {
	rsa, rsa2 *rsa.PrivateKey
	ec, ec2   *ecdsa.PrivateKey
	ed        ed25519.PrivateKey
}

var (
	keysOnce sync.Once
	keysVal  testKeys
)

func keys(t testing.TB) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		k, other := gatewaytest.NewKeys(t), gatewaytest.NewKeys(t)
		keysVal = testKeys{rsa: k.RSA, rsa2: other.RSA, ec: k.EC, ec2: other.EC, ed: k.Ed25519}
	})
	if keysVal.rsa == nil {
		t.Fatal("the test keys could not be made")
	}
	return keysVal
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replaceFile rewrites path atomically, as a mounted secret changes.
func replaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// claims are the claims of a token valid at t0 for sub, with grants.
func claims(sub string, subscribe, publish []string) jwt.MapClaims {
	return jwt.MapClaims{
		"sub": sub,
		"iat": t0.Add(-time.Minute).Unix(),
		"exp": t0.Add(time.Hour).Unix(),
		"roomcast": map[string]any{
			"subscribe": subscribe,
			"publish":   publish,
		},
	}
}

// newAuth returns an Authenticator for cfg that is closed when the test ends.
func newAuth(t testing.TB, cfg auth.Config) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(a.Close)
	return a
}

// hmacFile writes the test secret to a file and returns its path.
func hmacFile(t testing.TB) string {
	return writeFile(t, t.TempDir(), "hmac", []byte(hmacSecret+"\n"))
}

// streamRequest is a subscribe request with optional bearer token, cookie and ticket.
func streamRequest(bearer, cookie, ticket string) *http.Request {
	target := "/rooms/lobby/events"
	if ticket != "" {
		target += "?ticket=" + ticket
	}
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: "rc_token", Value: cookie})
	}
	return r
}

// memTickets is an in-memory replay.Tickets with TTLs on an injected clock. It tests
// this package's logic; the Redis implementation has its own tests in replay.
type memTickets struct {
	now   func() time.Time
	mu    sync.Mutex
	items map[string]memTicket
	takes int
}

type memTicket struct {
	value []byte
	until time.Time
}

var _ replay.Tickets = (*memTickets)(nil)

func newMemTickets(now func() time.Time) *memTickets {
	return &memTickets{now: now, items: map[string]memTicket{}}
}

func (m *memTickets) PutTicket(_ context.Context, id string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[id] = memTicket{value: append([]byte(nil), value...), until: m.now().Add(ttl)}
	return nil
}

func (m *memTickets) TakeTicket(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.takes++
	it, ok := m.items[id]
	delete(m.items, id)
	if !ok || !m.now().Before(it.until) {
		return nil, replay.ErrTicketUnknown
	}
	return it.value, nil
}

func (m *memTickets) PeekTicket(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it, ok := m.items[id]
	if !ok || !m.now().Before(it.until) {
		return nil, replay.ErrTicketUnknown
	}
	return it.value, nil
}

func (m *memTickets) Takes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.takes
}

// memRevocations is an in-memory replay.Revocations shared by several Authenticators,
// as Redis is shared by the pods of a fleet. Watchers are called under its lock, so
// calls never overlap.
type memRevocations struct {
	mu       sync.Mutex
	all      []replay.Revocation
	watchers []func(replay.Revocation)
}

var _ replay.Revocations = (*memRevocations)(nil)

func (m *memRevocations) Revoke(_ context.Context, r replay.Revocation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.all = append(m.all, r)
	for _, fn := range m.watchers {
		fn(r)
	}
	return nil
}

func (m *memRevocations) WatchRevocations(ctx context.Context, fn func(replay.Revocation)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.all {
		fn(r)
	}
	m.watchers = append(m.watchers, fn)
}
