package gateway

import (
	"context"
	"strings"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// clientOwners is the registry of which connection owns each WebSocket client id:
// one owner per client across the fleet. A hello claims the client; the owner
// refreshes its claim while connected and releases it when it ends. It is
// replay.Owners (the log's control plane's, in Redis or in memory), declared here
// so that tests can force orders with a fake; see there for the contract.
type clientOwners interface {
	// ClaimClient makes o the owner of its client when nobody owns it, or the
	// registered owner has o's identity and a boot older than or equal to o's; it
	// returns the owner it displaced (zero when none). Otherwise it returns who
	// holds the client and replay.ErrOtherIdentity or replay.ErrSuperseded, and
	// changes nothing.
	ClaimClient(ctx context.Context, o replay.Owner, ttl time.Duration) (replay.Owner, error)
	// RefreshClient extends the claim while o.Session owns the client, and claims it
	// again for o when there is no entry (claimed); replay.ErrNotOwner (and no
	// change) when another session holds it.
	RefreshClient(ctx context.Context, o replay.Owner, ttl time.Duration) (claimed bool, err error)
	// ReleaseClient ends the claim while session owns client; it does nothing when
	// it does not.
	ReleaseClient(ctx context.Context, client, session string) error
	// ClientOwner reports the live owner of client, if any.
	ClientOwner(ctx context.Context, client string) (replay.Owner, bool, error)
}

// podNotices carries the close notices pods send each other: the pod of a claim
// that displaced an owner tells the owner's pod to close it. It is replay.Notices
// (the log's control plane's), declared here beside clientOwners.
type podNotices interface {
	// NotifyPod sends a short notice to one pod; PodNotices hands the notices sent to
	// pod to fn until ctx ends. Delivery is at most once.
	NotifyPod(ctx context.Context, pod, notice string) error
	PodNotices(ctx context.Context, pod string, fn func(notice string)) error
}

// closeNotice is the notice that asks a pod to close a client's connection:
// "close <client> <session>", with 4409.
func closeNotice(client, session string) string { return "close " + client + " " + session }

// modeCloseNotice is an operator's close notice: closeNotice for a kick, and
// "close <client> <session> reconnect" for a close with 1012. A pod of an older
// version ignores the latter (it logs the notice as not a close notice).
func modeCloseNotice(client, session string, mode closeMode) string {
	if mode == closeReconnect {
		return closeNotice(client, session) + " reconnect"
	}
	return closeNotice(client, session)
}

// parseCloseNotice reads a close notice; ok is false for anything else. A notice
// without a mode is a kick.
func parseCloseNotice(n string) (client, session string, mode closeMode, ok bool) {
	f := strings.Fields(n)
	if len(f) < 3 || len(f) > 4 || f[0] != "close" || !replay.ValidClient(f[1]) || !replay.ValidSession(f[2]) {
		return "", "", 0, false
	}
	mode = closeKick
	if len(f) == 4 {
		if f[3] != closeReconnect.String() {
			return "", "", 0, false
		}
		mode = closeReconnect
	}
	return f[1], f[2], mode, true
}

// WatchOwners closes the pod's WebSocket connections that other pods displaced: it
// serves the notices sent to this pod until ctx ends. It also records the pod's
// clients' acks and serves receipts (receipts.go) meanwhile. Start it once per
// Server.
func (s *Server) WatchOwners(ctx context.Context) error {
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.receipts.run(rctx) }()
	defer func() { stop(); <-done }()
	return s.notices.PodNotices(ctx, s.cfg.PodID, func(n string) {
		if s.receipts.notice(n) {
			return
		}
		client, session, mode, ok := parseCloseNotice(n)
		if !ok {
			s.cfg.Logger.Warn("ignored a pod notice that is not a close notice")
			return
		}
		if c := s.wsLocal(client); c != nil && c.session == session {
			if mode == closeReconnect {
				c.kick(mode.code())
				return
			}
			c.kick(wsSuperseded, "superseded: the client connected again")
		}
	})
}
