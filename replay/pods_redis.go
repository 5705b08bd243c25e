package replay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Pods' liveness records in Redis: one hash per pod id, under "room:", the prefix a
// pod's ACL grants, and never among a room's keys:
//
//	room:pod:{<pod>}:live  hash instance, host, pid, started, admin, refreshed (Unix
//	                       ms, Redis's clock), with a TTL
//
// Claim (and refresh) and release are the library's functions roomcast_v1_pod and
// roomcast_v1_pod_release (roomcast.lua), each atomic and comparing the instance in
// Lua; PodHolder reads with HGETALL. Records read back that fail validation are
// counted with the malformed ownership entries (RedisStats.BadOwners) and reported as
// none. Calls are counted as OpOccupancy: both say which pods are where.
const (
	redisFnPod        = "roomcast_v1_pod"
	redisFnPodRelease = "roomcast_v1_pod_release"
)

// redisPodKey is a pod id's liveness record; id must have passed ValidPodID.
func redisPodKey(id string) string { return "room:pod:{" + id + "}:live" }

// redisPods is a RedisLog's liveness records (Pods), on the log's client.
type redisPods struct {
	l *RedisLog
}

var _ Pods = (*redisPods)(nil)

// ClaimPod implements Pods with roomcast_v1_pod, retried while safe (a repeat finds
// the instance's own record).
func (rp *redisPods) ClaimPod(ctx context.Context, r PodRecord, ttl time.Duration) (PodRecord, bool, error) {
	l := rp.l
	if l.isClosed.Load() {
		return PodRecord{}, false, ErrClosed
	}
	r, err := podArgs(r, ttl)
	if err != nil {
		return PodRecord{}, false, fmt.Errorf("replay: claim pod id: %w", err)
	}
	if err := l.usable(); err != nil {
		return PodRecord{}, false, fmt.Errorf("replay: claim pod id %q: %w", r.ID, err)
	}
	args := []string{r.Instance, r.Host, strconv.Itoa(r.PID), strconv.FormatInt(r.Started.UnixMilli(), 10), r.Admin,
		strconv.FormatInt(ttl.Milliseconds(), 10)}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var arr []rueidis.RedisMessage
	err = l.retry(cctx, true, func(ctx context.Context) error {
		cmd := l.client.B().Fcall().Function(redisFnPod).Numkeys(1).Key(redisPodKey(r.ID)).Arg(args...).Build()
		var err error
		arr, err = l.do(ctx, OpOccupancy, l.client, cmd).ToArray()
		return err
	})
	if err != nil {
		return PodRecord{}, false, fmt.Errorf("replay: claim pod id %q: %w", r.ID, l.mapErr(ctx, err))
	}
	var status int64 = -1
	var fields map[string]string
	if len(arr) == 2 {
		status, err = arr[0].AsInt64()
		if err == nil {
			fields, err = arr[1].AsStrMap()
		}
	}
	switch {
	case err != nil || status < 0 || status > 2:
		return PodRecord{}, false, fmt.Errorf("replay: claim pod id %q: %w: %s answered %v", r.ID, ErrUnavailable, redisFnPod, arr)
	case status > 0:
		return PodRecord{}, status == 2, nil
	}
	holder, ok := decodePod(r.ID, fields)
	if !ok {
		// Another instance holds the id, though its record is malformed: still in use.
		rp.l.owners.badOwner("pod liveness record")
		holder = PodRecord{ID: r.ID, Instance: fields["instance"]}
	}
	return holder, false, fmt.Errorf("replay: claim pod id %q: %w", r.ID, ErrPodInUse)
}

// ReleasePod implements Pods with roomcast_v1_pod_release; repeating it is safe.
func (rp *redisPods) ReleasePod(ctx context.Context, r PodRecord) error {
	l := rp.l
	if l.isClosed.Load() {
		return ErrClosed
	}
	if !ValidPodID(r.ID) || !ValidSession(r.Instance) {
		return fmt.Errorf("replay: release pod id %q: %w", r.ID, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("replay: release pod id %q: %w", r.ID, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	err := l.retry(cctx, true, func(ctx context.Context) error {
		cmd := l.client.B().Fcall().Function(redisFnPodRelease).Numkeys(1).Key(redisPodKey(r.ID)).Arg(r.Instance).Build()
		return l.do(ctx, OpOccupancy, l.client, cmd).Error()
	})
	if err != nil {
		return fmt.Errorf("replay: release pod id %q: %w", r.ID, l.mapErr(ctx, err))
	}
	return nil
}

// PodHolder implements Pods with HGETALL. A malformed record is counted and reported
// as none.
func (rp *redisPods) PodHolder(ctx context.Context, id string) (PodRecord, bool, error) {
	l := rp.l
	if l.isClosed.Load() {
		return PodRecord{}, false, ErrClosed
	}
	if !ValidPodID(id) {
		return PodRecord{}, false, fmt.Errorf("replay: pod holder %q: %w", id, ErrInvalid)
	}
	if err := l.usable(); err != nil {
		return PodRecord{}, false, fmt.Errorf("replay: pod holder %q: %w", id, err)
	}
	cctx, cancel := l.callCtx(ctx)
	defer cancel()
	var fields map[string]string
	err := l.retry(cctx, true, func(ctx context.Context) error {
		var err error
		fields, err = l.do(ctx, OpOccupancy, l.client, l.client.B().Hgetall().Key(redisPodKey(id)).Build()).AsStrMap()
		return err
	})
	if err != nil {
		return PodRecord{}, false, fmt.Errorf("replay: pod holder %q: %w", id, l.mapErr(ctx, err))
	}
	if len(fields) == 0 {
		return PodRecord{}, false, nil
	}
	r, ok := decodePod(id, fields)
	if !ok {
		rp.l.owners.badOwner("pod liveness record")
		return PodRecord{}, false, nil
	}
	return r, true, nil
}
