package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// A reconnect storm presents the same tokens again within seconds: each one was
// verified moments ago. verifiedCache remembers tokens that verified, by digest, so
// that a resume costs a hash and a map lookup instead of a signature check (tens of
// microseconds for RS256 or Ed25519).
//
// An entry holds only as long as everything it was verified against:
//   - it is tied to the key set it was verified with, and a reload that changes the
//     keys (rotation, a key removed) makes every entry miss;
//   - it ends when the token does (exp plus the leeway), and after verifiedTTL in any
//     case;
//   - revocations are checked on every use, as for a fresh token.
// Only tokens that verified are kept: a bad token is checked again each time.

const (
	// verifiedTTL bounds how long a verified token is remembered.
	verifiedTTL = time.Minute
	// maxVerified bounds the entries; past it an arbitrary one makes room.
	maxVerified = 16384
)

type verifiedEntry struct {
	p     Principal // Source unset: the caller sets it
	set   *keySet
	until time.Time
}

type verifiedCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]verifiedEntry
}

func newVerifiedCache() *verifiedCache {
	return &verifiedCache{entries: map[[sha256.Size]byte]verifiedEntry{}}
}

// get returns the Principal tok verified to under set, if it is remembered and still
// good at now.
func (c *verifiedCache) get(tok string, set *keySet, now time.Time) (Principal, bool) {
	sum := sha256.Sum256([]byte(tok))
	c.mu.Lock()
	e, ok := c.entries[sum]
	if ok && (e.set != set || !now.Before(e.until)) {
		delete(c.entries, sum)
		ok = false
	}
	c.mu.Unlock()
	return e.p, ok
}

// put remembers that tok verified to p under set at now, until the token ends (its
// exp plus leeway) or verifiedTTL has passed.
func (c *verifiedCache) put(tok string, p Principal, set *keySet, now time.Time, leeway time.Duration) {
	until := now.Add(verifiedTTL)
	if !p.Expires.IsZero() {
		if end := p.Expires.Add(leeway); end.Before(until) {
			until = end
		}
	}
	if !now.Before(until) {
		return
	}
	p.Source = ""
	sum := sha256.Sum256([]byte(tok))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxVerified {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[sum] = verifiedEntry{p: p, set: set, until: until}
}
