package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// logOwners is the client registry of the log (replay.Owners: the fleet's, in
// Redis, or the pod's, in memory) as the WebSocket transport asks it.
type logOwners struct{ o replay.Owners }

func (l logOwners) ClaimClient(ctx context.Context, client, boot, session, pod string, ttl time.Duration) (string, string, bool, error) {
	prev, err := l.o.ClaimClient(ctx, client, boot, session, pod, ttl)
	if errors.Is(err, replay.ErrSuperseded) {
		return prev.Pod, prev.Session, true, nil
	}
	if err != nil {
		return "", "", false, err
	}
	return prev.Pod, prev.Session, false, nil
}

func (l logOwners) RefreshClient(ctx context.Context, client, session string, ttl time.Duration) (bool, error) {
	err := l.o.RefreshClient(ctx, client, session, ttl)
	if errors.Is(err, replay.ErrNotOwner) {
		return false, nil
	}
	return err == nil, err
}

func (l logOwners) ReleaseClient(ctx context.Context, client, session string) error {
	return l.o.ReleaseClient(ctx, client, session)
}

func (l logOwners) ClientOwner(ctx context.Context, client string) (boot, session, pod string, since time.Time, ok bool, err error) {
	o, ok, err := l.o.ClientOwner(ctx, client)
	return o.Boot, o.Session, o.Pod, o.Since, ok, err
}

func (l logOwners) NotifyPod(ctx context.Context, pod, notice string) error {
	return l.o.NotifyPod(ctx, pod, notice)
}

func (l logOwners) PodNotices(ctx context.Context, pod string, fn func(string)) error {
	return l.o.PodNotices(ctx, pod, fn)
}
