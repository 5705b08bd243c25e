package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Client ownership: one live connection per client id across the fleet. A client
// names itself (Client) and the process it runs in (Boot, a UUIDv7 made once per
// process start); the gateway names each connection (Session), itself (Pod) and who
// the connection is (Identity: whom its credential names). The registry maps a
// client to the one (Boot, Session, Pod, Identity) that owns it, for a TTL that the
// owner refreshes while connected. While an entry lives, only its identity may claim
// the client. MemoryLog and RedisLog implement Owners.

var (
	// ErrSuperseded: a newer boot of the client owns it; the claim changed nothing.
	ErrSuperseded = errors.New("replay: client owned by a newer boot")
	// ErrOtherIdentity: another identity owns the client; the claim changed nothing.
	ErrOtherIdentity = errors.New("replay: client owned by another identity")
	// ErrNotOwner: another session owns the client; nothing changed.
	ErrNotOwner = errors.New("replay: session does not own the client")
	// ErrBadBoot: a boot id is not a UUIDv7 in its canonical text form.
	ErrBadBoot = errors.New("replay: boot id is not a UUIDv7")
)

// Owner is the connection that owns a client id.
type Owner struct {
	Client  string // the client id
	Boot    string // the client process's UUIDv7, canonical lowercase form
	Session string // the gateway's id of the owning connection
	Pod     string // the gateway pod that holds the connection
	// Identity is who the connection is, as the gateway names it (opaque here: 1 to
	// MaxIdentityLen bytes of UTF-8). "" only in an entry that a version before
	// identities were stored wrote: such an entry binds no identity.
	Identity string
	Since    time.Time // when this session claimed the client, millisecond precision
}

// Owners is the client ownership registry of a fleet (see the package doc).
type Owners interface {
	// ClaimClient makes o (its Client, Boot, Session, Pod and Identity; Since is
	// ignored) the owner of o.Client when nobody owns it (or the entry expired), or
	// the registered owner has o's identity and a boot older than or equal to o's.
	// It returns the owner it displaced (zero Owner when none; the caller's own
	// entry when the same session claims again). When another identity holds the
	// client it returns that owner and ErrOtherIdentity; when a newer boot of the
	// same identity does, that owner and ErrSuperseded; and it changes nothing. An
	// entry without an identity (written by an older version) binds none.
	ClaimClient(ctx context.Context, o Owner, ttl time.Duration) (Owner, error)
	// RefreshClient extends the entry's TTL while o.Session owns it. When there is
	// no entry (it expired, or the store lost it) it claims the client for o again
	// and reports claimed. When another session holds it, it returns ErrNotOwner
	// and changes nothing: a stale refresh from a displaced connection can never
	// win the entry back.
	RefreshClient(ctx context.Context, o Owner, ttl time.Duration) (claimed bool, err error)
	// ReleaseClient removes the entry only while session owns it (no error when it
	// does not).
	ReleaseClient(ctx context.Context, client, session string) error
	// ClientOwner reports the live owner, if any.
	ClientOwner(ctx context.Context, client string) (Owner, bool, error)
	// NotifyPod sends a short notice to one pod (e.g. "close <client> <session>"),
	// at most once: a notice sent while no PodNotices of that pod listens is lost.
	NotifyPod(ctx context.Context, pod, notice string) error
	// PodNotices calls fn with every notice sent to pod until ctx ends (then it
	// returns nil) or the log closes (ErrClosed). It blocks; calls to fn never
	// overlap, never come after it returns, and fn must not block. One PodNotices per
	// pod per log at a time: a second one fails with ErrInvalid.
	PodNotices(ctx context.Context, pod string, fn func(notice string)) error
}

// Bounds of the ownership registry, the same for every backend.
const (
	MaxClientLen  = 128 // bytes of [A-Za-z0-9._~:-]
	MaxSessionLen = 64  // bytes of [A-Za-z0-9_-]
	MaxNoticeLen  = 512 // bytes of printable ASCII
	// MaxIdentityLen bounds an owner's identity, in bytes of UTF-8.
	MaxIdentityLen = 320
	// MaxOwnerTTL bounds the TTL of a claim or refresh (at least 1ms).
	MaxOwnerTTL = 24 * time.Hour
	// maxOwners is how many live entries a MemoryLog holds.
	maxOwners = 100000
)

// ValidClient reports whether id matches [A-Za-z0-9._~:-]{1,128}: safe inside a
// Redis hash tag.
func ValidClient(id string) bool {
	return validChars(id, MaxClientLen, "._~:-")
}

// ValidSession reports whether id matches [A-Za-z0-9_-]{1,64}.
func ValidSession(id string) bool {
	return validChars(id, MaxSessionLen, "_-")
}

// ValidIdentity reports whether id is 1 to MaxIdentityLen bytes of UTF-8.
func ValidIdentity(id string) bool {
	return len(id) >= 1 && len(id) <= MaxIdentityLen && utf8.ValidString(id)
}

// validNotice reports whether n is 1 to MaxNoticeLen bytes of printable ASCII
// (spaces included, no control characters).
func validNotice(n string) bool {
	if len(n) == 0 || len(n) > MaxNoticeLen {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < 0x20 || n[i] > 0x7e {
			return false
		}
	}
	return true
}

// validChars reports whether s is 1 to max bytes of ASCII letters, digits and the
// bytes in extra.
func validChars(s string, max int, extra string) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		ok := false
		for j := 0; j < len(extra); j++ {
			ok = ok || c == extra[j]
		}
		if !ok {
			return false
		}
	}
	return true
}

// ParseBoot checks a boot id and returns its canonical form: a UUIDv7 as 36
// characters, 8-4-4-4-12 hex digits, version nibble 7, variant bits 10. Upper-case
// hex is accepted and returned in lower case. Anything else is ErrBadBoot.
//
// Boots compare as UUIDv7s: by their 48-bit Unix millisecond timestamp, then the
// rest, which is the byte order of the canonical form (CompareBoots).
func ParseBoot(s string) (string, error) {
	if len(s) != 36 {
		return "", fmt.Errorf("replay: boot of %d bytes: %w", len(s), ErrBadBoot)
	}
	var b [36]byte
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", fmt.Errorf("replay: boot: no dash at %d: %w", i, ErrBadBoot)
			}
			b[i] = c
			continue
		}
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", fmt.Errorf("replay: boot: not a hex digit at %d: %w", i, ErrBadBoot)
		}
		b[i] = c
	}
	if b[14] != '7' {
		return "", fmt.Errorf("replay: boot: version %c, want 7: %w", b[14], ErrBadBoot)
	}
	if v := b[19]; v != '8' && v != '9' && v != 'a' && v != 'b' {
		return "", fmt.Errorf("replay: boot: variant nibble %c, want 8 to b: %w", v, ErrBadBoot)
	}
	return string(b[:]), nil
}

// CompareBoots orders two canonical boots (ParseBoot's result): -1 when a is older,
// 0 when they are equal, +1 when a is newer.
func CompareBoots(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BootTime returns the Unix millisecond timestamp a canonical boot (ParseBoot's
// result) carries in its first 48 bits.
func BootTime(boot string) time.Time {
	ms, _ := strconv.ParseInt(boot[0:8]+boot[9:13], 16, 64) // 12 hex digits: never fails on a canonical boot
	return time.UnixMilli(ms)
}

// NewBoot returns a fresh UUIDv7 for at (its Unix millisecond timestamp), the rest
// random: what a client makes once per process start.
func NewBoot(at time.Time) string {
	var u [16]byte
	_, _ = rand.Read(u[6:]) // never fails (crypto/rand)
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], u[10:16])
	return string(s[:])
}

// ownerArgs checks the owner every backend's ClaimClient and RefreshClient take and
// returns it with its boot in canonical form and no Since.
func ownerArgs(o Owner, ttl time.Duration) (Owner, error) {
	if !ValidClient(o.Client) || !ValidSession(o.Session) || !ValidPodID(o.Pod) || !ValidIdentity(o.Identity) ||
		!validOwnerTTL(ttl) {
		return Owner{}, ErrInvalid
	}
	boot, err := ParseBoot(o.Boot)
	if err != nil {
		return Owner{}, err
	}
	o.Boot, o.Since = boot, time.Time{}
	return o, nil
}

// validOwnerTTL reports whether ttl is from 1ms to MaxOwnerTTL: Redis counts
// expiry in milliseconds.
func validOwnerTTL(ttl time.Duration) bool {
	return ttl >= time.Millisecond && ttl <= MaxOwnerTTL
}

// decodeOwner reads an owner entry as a backend stores it: the fields boot, session,
// pod, since (Unix ms, decimal) and identity ("" in an entry an older version
// wrote). ok is false for anything a claim could not have written.
func decodeOwner(client, boot, session, pod, since, identity string) (Owner, bool) {
	canon, err := ParseBoot(boot)
	ms, ok := parseTS(since)
	if err != nil || canon != boot || !ok || ms > maxSinceMS || !ValidClient(client) ||
		!ValidSession(session) || !ValidPodID(pod) || identity != "" && !ValidIdentity(identity) {
		return Owner{}, false
	}
	return Owner{Client: client, Boot: boot, Session: session, Pod: pod, Identity: identity, Since: time.UnixMilli(ms)}, true
}

// maxSinceMS bounds a stored claim time: the year 10000, far beyond any clock.
const maxSinceMS = 253402300800000
