package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// clientOwners is the registry of which connection owns each WebSocket client id:
// one owner per client across the fleet. A hello claims the client; the owner
// refreshes its claim while connected and releases it when it ends. It is what
// replay.Owners provides, in builtin types only (cmd/gateway adapts one to the
// other).
type clientOwners interface {
	// ClaimClient makes (boot, session, pod) the owner of client when nobody owns
	// it, or the registered boot is older than or equal to boot; prevPod and
	// prevSession name the owner it displaced ("" when none). When a newer boot holds
	// the client, superseded is true, prevPod and prevSession name that owner, and
	// nothing changes.
	ClaimClient(ctx context.Context, client, boot, session, pod string, ttl time.Duration) (prevPod, prevSession string, superseded bool, err error)
	// RefreshClient extends the claim while session owns client; owner is false
	// (and nothing changes) when it does not.
	RefreshClient(ctx context.Context, client, session string, ttl time.Duration) (owner bool, err error)
	// ReleaseClient ends the claim while session owns client; it does nothing when
	// it does not.
	ReleaseClient(ctx context.Context, client, session string) error
	// ClientOwner reports the live owner of client, if any.
	ClientOwner(ctx context.Context, client string) (boot, session, pod string, since time.Time, ok bool, err error)
	// NotifyPod sends a short notice to one pod; PodNotices hands the notices sent to
	// pod to fn until ctx ends. Delivery is at most once.
	NotifyPod(ctx context.Context, pod, notice string) error
	PodNotices(ctx context.Context, pod string, fn func(notice string)) error
}

// podOwners is the registry of one pod, used when Config.Owners is nil: a client
// has one owner on the pod, and no notices travel (there is no other pod).
type podOwners struct {
	now func() time.Time
	max int

	mu      sync.Mutex
	entries map[string]podOwner
}

type podOwner struct {
	boot, session, pod string
	since, expires     time.Time
}

func newPodOwners(max int) *podOwners {
	return &podOwners{now: time.Now, max: max, entries: map[string]podOwner{}}
}

var _ clientOwners = (*podOwners)(nil)

// liveLocked returns client's entry unless it expired. The lock must be held.
func (o *podOwners) liveLocked(client string) (podOwner, bool) {
	e, ok := o.entries[client]
	if ok && !o.now().Before(e.expires) {
		delete(o.entries, client)
		return podOwner{}, false
	}
	return e, ok
}

func (o *podOwners) ClaimClient(_ context.Context, client, boot, session, pod string, ttl time.Duration) (string, string, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.liveLocked(client)
	if ok && e.boot > boot {
		return e.pod, e.session, true, nil
	}
	if !ok && len(o.entries) >= o.max {
		return "", "", false, fmt.Errorf("gateway: claim %q: the pod holds %d clients, as many as it may", client, o.max)
	}
	now := o.now()
	o.entries[client] = podOwner{boot: boot, session: session, pod: pod, since: now, expires: now.Add(ttl)}
	return e.pod, e.session, false, nil
}

func (o *podOwners) RefreshClient(_ context.Context, client, session string, ttl time.Duration) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.liveLocked(client)
	if !ok || e.session != session {
		return false, nil
	}
	e.expires = o.now().Add(ttl)
	o.entries[client] = e
	return true, nil
}

func (o *podOwners) ReleaseClient(_ context.Context, client, session string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.entries[client]; ok && e.session == session {
		delete(o.entries, client)
	}
	return nil
}

func (o *podOwners) ClientOwner(_ context.Context, client string) (string, string, string, time.Time, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.liveLocked(client)
	return e.boot, e.session, e.pod, e.since, ok, nil
}

func (o *podOwners) NotifyPod(context.Context, string, string) error { return nil }

func (o *podOwners) PodNotices(ctx context.Context, _ string, _ func(string)) error {
	<-ctx.Done()
	return nil
}

// closeNotice is the notice that asks a pod to close a client's connection:
// "close <client> <session>".
func closeNotice(client, session string) string { return "close " + client + " " + session }

// parseCloseNotice reads a close notice; ok is false for anything else.
func parseCloseNotice(n string) (client, session string, ok bool) {
	f := strings.Fields(n)
	if len(f) != 3 || f[0] != "close" || !validClientID(f[1]) || !validSession(f[2]) {
		return "", "", false
	}
	return f[1], f[2], true
}

// validSession accepts 1 to 64 characters of A-Z a-z 0-9 _ -.
func validSession(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// WatchOwners closes the pod's WebSocket connections that other pods displaced: it
// serves the notices sent to this pod until ctx ends. Start it once per Server when
// Config.Owners is set.
func (s *Server) WatchOwners(ctx context.Context) error {
	return s.owners.PodNotices(ctx, s.cfg.PodID, func(n string) {
		client, session, ok := parseCloseNotice(n)
		if !ok {
			s.cfg.Logger.Warn("ignored a pod notice that is not a close notice")
			return
		}
		if c := s.wsLocal(client); c != nil && c.session == session {
			c.kick(wsSuperseded, "superseded: the client connected again")
		}
	})
}

// maxPodClients bounds the pod's own client registry.
const maxPodClients = 1 << 20
