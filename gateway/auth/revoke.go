package auth

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/roomcast/roomcast/replay"
)

const (
	// maxRevocations bounds the revocations a pod holds; when full, the one that lapses
	// first is forgotten first.
	maxRevocations = 100_000
	// defaultMaxAge is how long a revocation lasts when the caller does not say how long
	// tokens may live.
	defaultMaxAge = 24 * time.Hour
)

// Revoke refuses credentials fleet-wide: kind "sub" refuses every token of that user
// issued at or before now (a token without iat counts as issued before), kind "jti"
// refuses that one token; each until now + maxAge (+ the leeway; zero maxAge: 24h). It
// records the revocation locally, then in Config.Revocations when set, and tells the
// OnRevoke watchers of every pod. A bad kind or value wraps ErrInvalid; a failing
// store is an error wrapping the store's (the revocation still holds on this pod).
func (a *Authenticator) Revoke(ctx context.Context, kind, value string, maxAge time.Duration) error {
	if kind != "sub" && kind != "jti" {
		return fmt.Errorf("auth: revoke: kind %.16q is not \"sub\" or \"jti\": %w", kind, ErrInvalid)
	}
	if value == "" || len(value) > maxID || !utf8.ValidString(value) {
		return fmt.Errorf("auth: revoke: a %s must be 1 to 256 bytes of UTF-8: %w", kind, ErrInvalid)
	}
	if maxAge < 0 {
		return fmt.Errorf("auth: revoke: max age %s is negative", maxAge)
	}
	if maxAge == 0 {
		maxAge = defaultMaxAge
	}
	at := time.UnixMilli(a.now().UnixMilli())
	r := replay.Revocation{Kind: kind, Value: value, At: at, Until: at.Add(maxAge + a.cfg.Leeway)}
	a.learn(r)
	if a.cfg.Revocations == nil {
		return nil
	}
	if err := a.cfg.Revocations.Revoke(ctx, r); err != nil {
		return fmt.Errorf("auth: revoke %s %q: %w", kind, value, err)
	}
	return nil
}

// Revoked reports whether p is refused by a revocation in force.
func (a *Authenticator) Revoked(p Principal) bool { return a.revoke.refuses(p, a.now()) }

// OnRevoke registers fn, called (never concurrently, must not block) for each
// revocation learned from any pod, including this one, once per change.
func (a *Authenticator) OnRevoke(fn func(replay.Revocation)) {
	a.notifyMu.Lock()
	a.watchers = append(a.watchers, fn)
	a.notifyMu.Unlock()
}

// learn records r and tells the watchers when it is news.
func (a *Authenticator) learn(r replay.Revocation) {
	if a.closed.Load() {
		return
	}
	if (r.Kind != "sub" && r.Kind != "jti") || r.Value == "" || len(r.Value) > maxID {
		a.log.Warn("auth: ignoring a malformed revocation", "kind", r.Kind)
		return
	}
	if !a.revoke.add(r, a.now()) {
		return
	}
	a.log.Info("auth: revocation in force", "kind", r.Kind, "value", r.Value, "until", r.Until)
	a.notifyMu.Lock()
	defer a.notifyMu.Unlock()
	for _, fn := range a.watchers {
		fn(r)
	}
}

type revKey struct{ kind, value string }

// revocations is the pod's bounded set of revocations in force.
type revocations struct {
	mu  sync.RWMutex
	max int
	m   map[revKey]replay.Revocation
}

func newRevocations(max int) *revocations {
	return &revocations{max: max, m: map[revKey]replay.Revocation{}}
}

// add records r, merged with what is known for its kind and value (the later At and
// the later Until); it reports whether that changed anything. A revocation that has
// lapsed at now is ignored.
func (s *revocations) add(r replay.Revocation, now time.Time) bool {
	if !now.Before(r.Until) {
		return false
	}
	k := revKey{r.Kind, r.Value}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[k]; ok {
		changed := false
		if r.At.After(old.At) {
			old.At, changed = r.At, true
		}
		if r.Until.After(old.Until) {
			old.Until, changed = r.Until, true
		}
		s.m[k] = old
		return changed
	}
	if len(s.m) >= s.max {
		s.evictLocked(now)
	}
	s.m[k] = r
	return true
}

// evictLocked forgets every lapsed revocation, and when none had lapsed, the one that
// lapses first.
func (s *revocations) evictLocked(now time.Time) {
	var first revKey
	var firstUntil time.Time
	for k, r := range s.m {
		if !now.Before(r.Until) {
			delete(s.m, k)
			continue
		}
		if firstUntil.IsZero() || r.Until.Before(firstUntil) {
			first, firstUntil = k, r.Until
		}
	}
	if len(s.m) >= s.max {
		delete(s.m, first)
	}
}

// refuses reports whether a revocation in force at now refuses p.
func (s *revocations) refuses(p Principal, now time.Time) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.m) == 0 {
		return false
	}
	if p.JTI != "" {
		if r, ok := s.m[revKey{"jti", p.JTI}]; ok && now.Before(r.Until) {
			return true
		}
	}
	if p.Sub != "" {
		if r, ok := s.m[revKey{"sub", p.Sub}]; ok && now.Before(r.Until) && !p.IssuedAt.After(r.At) {
			return true
		}
	}
	return false
}
