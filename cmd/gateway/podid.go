package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// One pod id, one live pod. In fleet mode the pod id names the pod in occupancy
// records and answers, among the owners of WebSocket clients and on its notice
// channel: two live pods with one id would count as one and take each other's
// notices. So a pod claims its id's liveness record in Redis at start-up, refreshes
// it while it runs and releases it when it stops; a second live process with the
// same id refuses to start (exit 2). A pod that crashed leaves its record behind
// until the record's TTL passes: a start that finds a record watches it, and when
// it is not refreshed (its pod is gone) claims the id once it lapses, so a restart
// right after a crash waits at most that TTL. Embedded, a pod is alone: nothing to
// claim.

// podIDTimes are how long a record outlives its last refresh (ttl) and how often a
// live pod refreshes it (every). A start finds a live holder within every or so, and
// a crashed one's id free within ttl. Tests shorten them.
var podIDTimes = struct{ ttl, every time.Duration }{ttl: 15 * time.Second, every: time.Second}

// podIDLease is this process's claim of its pod id: it keeps the record alive until
// release.
type podIDLease struct {
	pods   replay.Pods
	rec    replay.PodRecord
	ttl    time.Duration
	every  time.Duration
	logger *slog.Logger

	stop     context.CancelFunc
	done     chan struct{}
	releases sync.Once
}

// claimPodID claims the pod id for this process in fleet mode (nil, nil embedded).
// It fails when another live process holds the id; it starts all the same, and
// claims later, when Redis cannot be reached now.
func claimPodID(cfg config, ctl replay.Control, logger *slog.Logger) (*podIDLease, error) {
	if cfg.Redis == "" {
		return nil, nil
	}
	host, _ := os.Hostname()
	if !replay.ValidPodID(host) {
		host = ""
	}
	admin := cfg.AdminAddr
	if !replay.ValidPodID(admin) {
		admin = ""
	}
	rec := replay.PodRecord{
		ID: cfg.podID(), Instance: newInstance(), Host: host, PID: os.Getpid(), Started: time.Now(), Admin: admin,
	}
	err := podIDInUse(rec.ID, host)
	return claimPod(ctl.Pods, rec, podIDTimes.ttl, podIDTimes.every, err, logger)
}

// podIDInUse returns the error of a start whose pod id another live process holds;
// it names that process.
func podIDInUse(id, host string) func(holder replay.PodRecord) error {
	hint := ""
	if id == host {
		hint = " (it defaults to the hostname)"
	}
	return func(holder replay.PodRecord) error {
		return fmt.Errorf("pod id %q is already in use by a live pod (%s); give each pod its own --pod-id%s", id, holder, hint)
	}
}

// newInstance is a random name for this process's record: 128 bits, unpadded
// base64url.
func newInstance() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// claimPod claims rec's id for ttl and starts refreshing it every every. When
// another process's record holds the id, it watches that record for up to ttl and
// one refresh more: a record that is refreshed (or taken by yet another process)
// is a live pod's, and claimPod returns inUse(holder); one that lapses was a
// stopped pod's, and the id is claimed (with a warning once two refreshes were
// missed, so that a person sees why the start waits). When the store cannot be reached it warns
// and returns the lease all the same: its refreshes claim the id once they can.
func claimPod(pods replay.Pods, rec replay.PodRecord, ttl, every time.Duration, inUse func(replay.PodRecord) error, logger *slog.Logger) (*podIDLease, error) {
	ctx := context.Background()
	var (
		first           replay.PodRecord
		watching, said  bool
		since, deadline time.Time
		poll            = min(every/4, 250*time.Millisecond)
	)
	for {
		holder, _, err := pods.ClaimPod(ctx, rec, ttl)
		if err == nil {
			if watching {
				logger.Info("the pod id's record lapsed: pod id claimed", "pod_id", rec.ID, "previous", first.String())
			}
			break
		}
		if !errors.Is(err, replay.ErrPodInUse) {
			// Redis unreachable, or it refused: not a reason to stay down.
			logger.Warn("pod id not checked yet: the refreshes of this pod's record claim it once Redis answers", "pod_id", rec.ID, "err", err)
			break
		}
		now := time.Now()
		switch {
		case !watching:
			first, watching, since, deadline = holder, true, now, now.Add(ttl+every)
		case holder.Instance != first.Instance || !holder.Refreshed.Equal(first.Refreshed):
			return nil, inUse(holder)
		case now.After(deadline):
			return nil, inUse(holder)
		case !said && now.Sub(since) > 2*every:
			// A live holder would have refreshed by now: say why the start waits.
			said = true
			logger.Warn("pod id held by a process that stopped refreshing its record: waiting for the record to lapse",
				"pod_id", rec.ID, "holder", holder.String(), "wait_at_most", deadline.Sub(now).Round(time.Second).String())
		}
		time.Sleep(poll)
	}
	rctx, stop := context.WithCancel(context.Background())
	l := &podIDLease{pods: pods, rec: rec, ttl: ttl, every: every, logger: logger, stop: stop, done: make(chan struct{})}
	go l.refresh(rctx)
	return l, nil
}

// refresh claims the record again every l.every until ctx ends. It says once when
// another process holds the id (the two started while Redis was out of reach, or
// this pod's record lapsed while it could not reach Redis) and once when the id is
// this pod's again.
func (l *podIDLease) refresh(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.every)
	defer t.Stop()
	taken := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		holder, claimed, err := l.pods.ClaimPod(ctx, l.rec, l.ttl)
		switch {
		case errors.Is(err, replay.ErrPodInUse):
			if !taken {
				l.logger.Error("another live pod holds this pod's id: occupancy and WebSocket notices mix the two; give each pod its own --pod-id",
					"pod_id", l.rec.ID, "holder", holder.String())
			}
			taken = true
		case err != nil:
			l.logger.Debug("refreshing the pod id's record", "pod_id", l.rec.ID, "err", err)
		case taken || claimed:
			l.logger.Info("pod id claimed again", "pod_id", l.rec.ID)
			taken = false
		}
	}
}

// release stops the refreshes and deletes the record if it is still this
// process's, so the id is free at once. It is safe on a nil lease and to call more
// than once.
func (l *podIDLease) release(ctx context.Context) {
	if l == nil {
		return
	}
	l.releases.Do(func() {
		l.stop()
		<-l.done
		if err := l.pods.ReleasePod(ctx, l.rec); err != nil {
			l.logger.Warn("releasing the pod id: it is free once its record lapses", "pod_id", l.rec.ID, "lapses_within", l.ttl.String(), "err", err)
		}
	})
}
