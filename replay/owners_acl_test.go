package replay_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// exerciseOwners runs everything the ownership registry does through two logs (two
// pods): claim, takeover, a refused claim, refresh, a stale refresh, owner, acks, release,
// and a notice from one pod to the other's channel, in another slot than the
// client's key.
func exerciseOwners(t *testing.T, a, b *replay.RedisLog) {
	t.Helper()
	ctlB := controlOf(t, b)
	ctlA := controlOf(t, a)
	ctx := context.Background()
	client := redistest.Prefix(t) + ":acl"
	pod := "acl-pod-0"
	for i := 1; redistest.Slot("{"+pod+"}") == redistest.Slot("{"+client+"}"); i++ {
		pod = "acl-pod-" + strconv.Itoa(i)
	}
	old, boot := replay.NewBoot(time.Now().Add(-time.Second)), replay.NewBoot(time.Now())
	if _, err := ctlA.Owners.ClaimClient(ctx, testOwner(client, old, "sA", "pod-a"), time.Minute); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if prev, err := ctlB.Owners.ClaimClient(ctx, testOwner(client, boot, "sB", pod), time.Minute); err != nil || prev.Session != "sA" {
		t.Fatalf("takeover: %+v, %v", prev, err)
	}
	if _, err := ctlA.Owners.ClaimClient(ctx, testOwner(client, old, "sA", "pod-a"), time.Minute); !errors.Is(err, replay.ErrSuperseded) {
		t.Fatalf("claim by the older boot: %v; want ErrSuperseded", err)
	}
	if _, err := ctlB.Owners.RefreshClient(ctx, testOwner(client, boot, "sB", pod), time.Minute); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if _, err := ctlA.Owners.RefreshClient(ctx, testOwner(client, old, "sA", "pod-a"), time.Minute); !errors.Is(err, replay.ErrNotOwner) {
		t.Fatalf("stale refresh: %v; want ErrNotOwner", err)
	}
	if o, ok, err := ctlA.Owners.ClientOwner(ctx, client); err != nil || !ok || o.Session != "sB" {
		t.Fatalf("owner: %+v, %v, %v", o, ok, err)
	}
	ack := replay.Ack{Room: "inbox.acl", ID: replay.Position{Epoch: "e", Seq: 3}, At: time.UnixMilli(1_700_000_000_000)}
	if n, err := ctlB.Receipts.RecordAcks(ctx, []replay.AckRecord{{Client: client, Session: "sB", Acks: []replay.Ack{ack}}}); err != nil || n != 1 {
		t.Fatalf("record acks: %d, %v", n, err)
	}
	if _, got, ok, err := ctlA.Receipts.ClientAck(ctx, client, "inbox.acl"); err != nil || !ok || got.ID != ack.ID {
		t.Fatalf("client ack: %+v, %v, %v", got, ok, err)
	}
	if err := ctlA.Owners.ReleaseClient(ctx, client, "sA"); err != nil {
		t.Fatalf("release by a non-owner: %v", err)
	}
	if err := ctlB.Owners.ReleaseClient(ctx, client, "sB"); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, ok, err := ctlA.Owners.ClientOwner(ctx, client); ok || err != nil {
		t.Fatalf("owner after release: %v, %v", ok, err)
	}

	lctx, cancel := context.WithCancel(ctx)
	notices := make(chan string, 64)
	done := make(chan error, 1)
	go func() {
		done <- ctlB.Notices.PodNotices(lctx, pod, func(n string) {
			select {
			case notices <- n:
			default:
			}
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pod notices: %v", err)
		}
	}()
	replaytest.Eventually(t, 20*time.Second, "a notice delivered", func() error {
		if err := ctlA.Notices.NotifyPod(ctx, pod, "close "+client+" sB"); err != nil {
			return err
		}
		select {
		case n := <-notices:
			if n != "close "+client+" sB" {
				t.Fatalf("notice %q", n)
			}
			return nil
		default:
			return errors.New("not yet")
		}
	})
}

// exercisePods runs everything the liveness records do through two logs (two
// pods): a claim, a refused claim of the same id, a refresh, the holder, a
// release.
func exercisePods(t *testing.T, a, b *replay.RedisLog) {
	t.Helper()
	pa, pb := controlOf(t, a).Pods, controlOf(t, b).Pods
	ctx := context.Background()
	id := redistest.Prefix(t) + "-acl"
	ra, rb := testPod(id, "instA"), testPod(id, "instB")
	if _, claimed, err := pa.ClaimPod(ctx, ra, time.Minute); !claimed || err != nil {
		t.Fatalf("claim pod id: %v, %v", claimed, err)
	}
	if _, _, err := pb.ClaimPod(ctx, rb, time.Minute); !errors.Is(err, replay.ErrPodInUse) {
		t.Fatalf("claim of a held pod id: %v; want ErrPodInUse", err)
	}
	if _, _, err := pa.ClaimPod(ctx, ra, time.Minute); err != nil {
		t.Fatalf("refresh pod id: %v", err)
	}
	if h, ok, err := pb.PodHolder(ctx, ra.ID); !ok || err != nil || h.Instance != "instA" {
		t.Fatalf("pod holder: %+v, %v, %v", h, ok, err)
	}
	if err := pa.ReleasePod(ctx, ra); err != nil {
		t.Fatalf("release pod id: %v", err)
	}
}

// TestRedisACLOwnersStandalone: with the default user off and the gateway's user
// holding exactly the documented ACL, two logs use the ownership registry, pod
// notices and pods' liveness records, and Redis refused none of their commands.
func TestRedisACLOwnersStandalone(t *testing.T) {
	t.Parallel()
	srv, cfg := aclStandalone(t)
	a := newRedisLog(t, []string{srv.Addr}, cfg)
	b := newRedisLog(t, []string{srv.Addr}, cfg)
	exerciseOwners(t, a, b)
	exercisePods(t, a, b)
	refusedNone(t, srv, "the logs")
}

// TestRedisACLOwnersCluster: the same on a 3-primary cluster whose nodes give the
// gateway's user exactly the documented ACL.
func TestRedisACLOwnersCluster(t *testing.T) {
	t.Parallel()
	c, cfg := aclCluster(t)
	a := newRedisLog(t, c.Addrs(), cfg)
	b := newRedisLog(t, c.Addrs(), cfg)
	exerciseOwners(t, a, b)
	exercisePods(t, a, b)
	clusterRefusedNone(t, c, "the logs")
}
