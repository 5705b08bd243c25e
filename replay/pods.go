package replay

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Pods' liveness records: one pod id, one live pod. Every pod of a fleet names itself
// with a pod id (ValidPodID, as --pod-id); occupancy records and pod notices are
// keyed by it, so two live pods with one id would count as one and take each other's
// notices. A pod claims its id's record at start-up, refreshes it while it runs and
// releases it when it stops; one that crashes lets it lapse after its TTL. Both logs'
// control planes implement Pods (ControlOf).

// ErrPodInUse: another live process holds the pod id; nothing changed.
var ErrPodInUse = errors.New("replay: pod id in use by another live pod")

// PodRecord is a pod's liveness record: which process holds a pod id, and what an
// operator needs to find it.
type PodRecord struct {
	ID string // the pod id (ValidPodID)
	// Instance tells two processes with one id apart: random, made once per
	// process start, 1 to 64 bytes of [A-Za-z0-9_-] (ValidSession's form).
	Instance string
	Host     string    // the host the process runs on; "" or as ValidPodID
	PID      int       // its process id, 0 when unknown
	Started  time.Time // when it started, millisecond precision
	Admin    string    // its admin listener's address as configured; "" or as ValidPodID
	// Refreshed is when the record was last written, on the store's clock (Redis's
	// in a fleet). ClaimPod ignores it.
	Refreshed time.Time
}

// String names the process for a person: host, pid, start time and admin address.
func (r PodRecord) String() string {
	host := r.Host
	if host == "" {
		host = "unknown host"
	}
	s := fmt.Sprintf("host %s, pid %d, started %s", host, r.PID, r.Started.UTC().Format(time.RFC3339))
	if r.Admin != "" {
		s += ", admin " + r.Admin
	}
	return s
}

// Pods holds the liveness record of each pod id of a fleet.
type Pods interface {
	// ClaimPod makes r the record of r.ID for ttl when no live record holds the id
	// (claimed), or extends r's own record (same Instance) for ttl from now and marks
	// it refreshed. When another instance's record holds the id it returns that
	// record and ErrPodInUse and changes nothing. Repeating a claim is safe. A claim
	// that finds no record of its own where it had one (it lapsed while the pod could
	// not reach the store, or the store lost it) simply claims again.
	ClaimPod(ctx context.Context, r PodRecord, ttl time.Duration) (holder PodRecord, claimed bool, err error)
	// ReleasePod deletes r.ID's record only while r's instance holds it (no error
	// when it does not).
	ReleasePod(ctx context.Context, r PodRecord) error
	// PodHolder returns the live record of id, if any.
	PodHolder(ctx context.Context, id string) (PodRecord, bool, error)
}

// maxMemPods bounds the records a MemoryLog holds.
const maxMemPods = 10000

// podArgs checks the record and TTL every backend's ClaimPod takes, and returns the
// record with its times at millisecond precision and no Refreshed.
func podArgs(r PodRecord, ttl time.Duration) (PodRecord, error) {
	if !ValidPodID(r.ID) || !ValidSession(r.Instance) || !validPodField(r.Host) || !validPodField(r.Admin) ||
		r.PID < 0 || r.PID > maxPID || r.Started.UnixMilli() < 1 || r.Started.UnixMilli() > maxSinceMS ||
		!validOwnerTTL(ttl) {
		return PodRecord{}, ErrInvalid
	}
	r.Started, r.Refreshed = time.UnixMilli(r.Started.UnixMilli()), time.Time{}
	return r, nil
}

// validPodField reports whether s may be a record's host or admin address: "" or
// what ValidPodID accepts.
func validPodField(s string) bool { return s == "" || ValidPodID(s) }

// maxPID bounds a record's process id: 15 decimal digits at most, as Redis's side
// reads numbers.
const maxPID = 1<<31 - 1

// decodePod reads a record as a backend stores it: the fields instance, host, pid,
// started and refreshed (Unix ms, decimal) and admin. ok is false for anything a
// claim could not have written.
func decodePod(id string, f map[string]string) (PodRecord, bool) {
	pid, okPID := parseCount(f["pid"])
	started, okStarted := parseTS(f["started"])
	refreshed, okRefreshed := parseTS(f["refreshed"])
	r := PodRecord{ID: id, Instance: f["instance"], Host: f["host"], PID: int(pid), Admin: f["admin"],
		Started: time.UnixMilli(started), Refreshed: time.UnixMilli(refreshed)}
	if !okPID || !okStarted || !okRefreshed || pid > maxPID || started > maxSinceMS || refreshed > maxSinceMS ||
		!ValidPodID(id) || !ValidSession(r.Instance) || !validPodField(r.Host) || !validPodField(r.Admin) {
		return PodRecord{}, false
	}
	return r, true
}

// parseCount parses a decimal count of at most 15 digits: "0" or no leading zero.
func parseCount(s string) (int64, bool) {
	if s == "0" {
		return 0, true
	}
	if len(s) > 15 {
		return 0, false
	}
	return parseTS(s)
}
