package replay_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// callLog records what a call observer heard.
type callLog struct {
	mu    sync.Mutex
	calls map[replay.RedisOp]int
	errs  map[replay.RedisOp]int
}

func (c *callLog) observe(op replay.RedisOp, took time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if took >= 0 {
		c.calls[op]++
	}
	if err != nil {
		c.errs[op]++
	}
}

func (c *callLog) counts(op replay.RedisOp) (calls, errs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op], c.errs[op]
}

// TestRedisObserveCalls: every kind of call reaches the observer under its op, and
// a server gone makes the calls fail under theirs.
func TestRedisObserveCalls(t *testing.T) {
	srv := redistest.Standalone(t)
	l := newRedisLog(t, srv.Addrs(), replay.RedisConfig{Timeout: 500 * time.Millisecond, HealthInterval: 20 * time.Millisecond})
	ctl := controlOf(t, l)
	c := &callLog{calls: map[replay.RedisOp]int{}, errs: map[replay.RedisOp]int{}}
	l.ObserveCalls(c.observe)
	ctx := context.Background()
	room := redistest.Prefix(t)
	msg := replay.Message{Body: json.RawMessage(`{"a":1}`)}

	if err := l.Subscribe(ctx, room, func(replay.Event) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, room, msg); err != nil {
		t.Fatal(err)
	}
	if _, errs := l.AppendBatch(ctx, []string{room, room}, []replay.Message{msg, msg}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if _, _, err := l.Since(ctx, room, replay.Position{}, 10); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Tickets.PutTicket(ctx, "tk"+room, []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Tickets.TakeTicket(ctx, "tk"+room); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Tickets.TakeTicket(ctx, "tk"+room); err == nil {
		t.Fatal("a ticket taken twice")
	}
	now := time.Now()
	if err := ctl.Revocations.Revoke(ctx, replay.Revocation{Kind: "sub", Value: room, At: now, Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Occupancy.SetOccupancy(ctx, "pod-a", time.Minute, []replay.RoomCount{{Room: room, Members: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Occupancy.Occupancy(ctx, room); err != nil {
		t.Fatal(err)
	}
	boot := replay.NewBoot(now)
	if _, err := ctl.Owners.ClaimClient(ctx, testOwner("c"+room, boot, "s1", "pod-a"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ctl.Owners.ClientOwner(ctx, "c"+room); err != nil {
		t.Fatal(err)
	}
	if err := l.Unsubscribe(ctx, room); err != nil {
		t.Fatal(err)
	}
	replaytest.Eventually(t, 10*time.Second, "a health check", func() bool { n, _ := c.counts(replay.OpHealth); return n > 0 })
	for op, want := range map[replay.RedisOp]int{replay.OpSubscribe: 2, replay.OpPublish: 1, replay.OpBatch: 1,
		replay.OpSince: 1, replay.OpTicket: 3, replay.OpRevoke: 1, replay.OpOccupancy: 2, replay.OpOwner: 2} {
		// An unknown ticket is a nil reply, not an error.
		if n, errs := c.counts(op); n < want || errs != 0 {
			t.Errorf("%s: %d calls, %d errors; want at least %d and none", op, n, errs, want)
		}
	}

	// A call its caller gave up on says nothing about Redis: not an error.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, _, _ = l.Since(gone, room, replay.Position{}, 10)
	_ = ctl.Occupancy.SetOccupancy(gone, "pod-a", time.Minute, []replay.RoomCount{{Room: room, Members: 1}})
	for _, op := range []replay.RedisOp{replay.OpSince, replay.OpOccupancy} {
		if _, errs := c.counts(op); errs != 0 {
			t.Errorf("%s: %d errors after calls whose context was cancelled; want none", op, errs)
		}
	}

	_, _ = srv.Do("SHUTDOWN", "NOSAVE")
	replaytest.Eventually(t, 10*time.Second, "failed health checks", func() bool { _, e := c.counts(replay.OpHealth); return e > 0 })
	if _, err := l.Append(ctx, room, msg); err == nil {
		t.Fatal("append with redis gone")
	}
	if _, errs := c.counts(replay.OpPublish); errs == 0 {
		t.Error("a failed append was not observed as a publish error")
	}
}
