package replay

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/roomcast/roomcast/replay/wire"
)

// Client ownership: one live connection per client id across the fleet. A client
// names itself (Client) and the process it runs in (Boot, a UUIDv7 made once per
// process start); the gateway names each connection (Session), itself (Pod) and who
// the connection is (Identity: whom its credential names). The registry maps a
// client to the one (Boot, Session, Pod, Identity) that owns it, for a TTL that the
// owner refreshes while connected. While an entry lives, only its identity may claim
// the client. The owner a claim displaces is told to close through Notices. Both
// logs' control planes implement Owners and Notices (ControlOf).

var (
	// ErrSuperseded: a newer boot of the client owns it; the claim changed nothing.
	ErrSuperseded = errors.New("replay: client owned by a newer boot")
	// ErrOtherIdentity: another identity owns the client; the claim changed nothing.
	ErrOtherIdentity = errors.New("replay: client owned by another identity")
	// ErrNotOwner: another session owns the client; nothing changed.
	ErrNotOwner = errors.New("replay: session does not own the client")
	// ErrBadBoot: a boot id is not a UUIDv7 in its canonical text form.
	ErrBadBoot = wire.ErrBadBoot
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
}

// Notices carries short notices to one pod of a fleet, at most once: the owner of a
// client tells the pod of the owner it displaced to close it.
type Notices interface {
	// NotifyPod sends a short notice (1 to MaxNoticeLen bytes of printable ASCII,
	// e.g. "close <client> <session>") to one pod, at most once: a notice sent
	// while no PodNotices of that pod listens is lost.
	NotifyPod(ctx context.Context, pod, notice string) error
	// PodNotices calls fn with every notice sent to pod until ctx ends (then it
	// returns nil) or the log closes (ErrClosed). It blocks; calls to fn never
	// overlap, never come after it returns, and fn must not block. One PodNotices per
	// pod per store at a time: a second one fails with ErrInvalid.
	PodNotices(ctx context.Context, pod string, fn func(notice string)) error
}

// Bounds of the ownership registry, the same for every backend.
const (
	MaxClientLen  = wire.MaxClientLen  // bytes of [A-Za-z0-9._~:-]
	MaxSessionLen = wire.MaxSessionLen // bytes of [A-Za-z0-9_-]
	MaxNoticeLen  = 512                // bytes of printable ASCII
	// MaxIdentityLen bounds an owner's identity, in bytes of UTF-8.
	MaxIdentityLen = 320
	// MaxOwnerTTL bounds the TTL of a claim or refresh (at least 1ms).
	MaxOwnerTTL = 24 * time.Hour
	// maxOwners is how many live entries a MemoryLog holds.
	maxOwners = 100000
)

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
