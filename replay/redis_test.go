package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// Tests here run against real redis-server processes (see redistest). The
// non-destructive ones share one standalone server and one cluster and keep to rooms
// named from redistest.Prefix; the ones that fail over, kill or migrate start their
// own cluster (redis_faults_test.go).

func newRedisLog(t testing.TB, addrs []string, cfg replay.RedisConfig) *replay.RedisLog {
	t.Helper()
	cfg.Addrs = addrs
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := replay.NewRedisLog(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return l
}

func TestRedisLogContractStandalone(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	replaytest.Run(t, func(t *testing.T, history int) replay.Log {
		return newRedisLog(t, s.Addrs(), replay.RedisConfig{History: history})
	})
}

func TestRedisLogContractCluster(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	replaytest.Run(t, func(t *testing.T, history int) replay.Log {
		return newRedisLog(t, c.Addrs(), replay.RedisConfig{History: history})
	})
}

func msgN(i int) replay.Message {
	return replay.Message{Body: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
}

func mustAppend(t testing.TB, l replay.Log, room string, m replay.Message) replay.Event {
	t.Helper()
	ev, err := l.Append(context.Background(), room, m)
	if err != nil {
		t.Fatalf("append to %q: %v", room, err)
	}
	return ev
}

// ringRecorder collects rings; zero marks a "read the log" ring.
type ringRecorder struct {
	ch chan replay.Event
}

func subscribeRec(t testing.TB, l replay.Log, room string) *ringRecorder {
	t.Helper()
	r := &ringRecorder{ch: make(chan replay.Event, 4096)}
	err := l.Subscribe(context.Background(), room, func(ev replay.Event) {
		select {
		case r.ch <- ev:
		default:
			t.Error("ring buffer full")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// next returns the next ring with a seq, skipping zero rings, within d.
func (r *ringRecorder) next(t testing.TB, d time.Duration) replay.Event {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev := <-r.ch:
			if ev.Seq != 0 {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no ring within %s", d)
		}
	}
}

// zero waits for a zero ring within d, dropping event rings on the way.
func (r *ringRecorder) zero(t testing.TB, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev := <-r.ch:
			if ev.Seq == 0 {
				return
			}
		case <-timer.C:
			t.Fatalf("no zero ring within %s", d)
		}
	}
}

func TestRedisIdempotencyAcrossPods(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	a := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	b := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	room := redistest.Prefix(t) + ".idem"
	m := msgN(1)
	m.IdempotencyKey = "order-42 {with} braces"

	const each = 20
	var mu sync.Mutex
	seqs := map[uint64]int{}
	var wg sync.WaitGroup
	for _, l := range []*replay.RedisLog{a, b} {
		for i := 0; i < each; i++ {
			wg.Go(func() {
				ev, err := l.Append(context.Background(), room, m)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seqs[ev.Seq]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if len(seqs) != 1 || seqs[1] != 2*each {
		t.Fatalf("seqs %v, want every append to get seq 1", seqs)
	}
	evs, head, err := b.Since(context.Background(), room, replay.Position{}, 100)
	if err != nil || len(evs) != 1 || head.Seq != 1 || string(evs[0].Body) != `{"n":1}` {
		t.Fatalf("log: %+v head %v err %v", evs, head, err)
	}
}

func TestRedisRingsAcrossPods(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	a := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	b := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	room := redistest.Prefix(t) + ".ring"
	rec := subscribeRec(t, a, room)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < 25; i++ {
				mustAppend(t, b, room, msgN(i))
			}
		})
	}
	wg.Wait()
	var epoch string
	for s := uint64(1); s <= 100; s++ {
		ev := rec.next(t, 10*time.Second)
		if ev.Seq != s || ev.Room != room || len(ev.Body) == 0 || ev.TS <= 0 {
			t.Fatalf("ring %d: %+v", s, ev)
		}
		if epoch == "" {
			epoch = ev.Epoch
		} else if ev.Epoch != epoch {
			t.Fatalf("epoch changed: %q then %q", epoch, ev.Epoch)
		}
	}
}

func shardNumSub(t testing.TB, n *redistest.Node, channel string) int {
	t.Helper()
	out := n.MustDo(t, "PUBSUB", "SHARDNUMSUB", channel)
	lines := strings.Split(out, "\n")
	v, err := strconv.Atoi(strings.TrimSpace(lines[len(lines)-1]))
	if err != nil {
		t.Fatalf("PUBSUB SHARDNUMSUB: %q", out)
	}
	return v
}

func TestRedisUnsubscribeEndsTheSubscription(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	l := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	room := redistest.Prefix(t) + ".unsub"
	channel := "room:{" + room + "}"
	owner := c.NodeForKey(t, channel)

	subscribeRec(t, l, room)
	if n := shardNumSub(t, owner, channel); n != 1 {
		t.Fatalf("after Subscribe: SHARDNUMSUB %d, want 1", n)
	}
	if err := l.Unsubscribe(context.Background(), room); err != nil {
		t.Fatal(err)
	}
	replaytest.Eventually(t, 5*time.Second, "the subscription gone from the owner", func() error {
		if n := shardNumSub(t, owner, channel); n != 0 {
			return fmt.Errorf("SHARDNUMSUB %d, want 0", n)
		}
		return nil
	})
	// Subscribe again at once, then twice (the second replaces the ring).
	rec1 := subscribeRec(t, l, room)
	rec2 := subscribeRec(t, l, room)
	if n := shardNumSub(t, owner, channel); n != 1 {
		t.Fatalf("after resubscribing: SHARDNUMSUB %d, want 1", n)
	}
	mustAppend(t, l, room, msgN(1))
	if ev := rec2.next(t, 5*time.Second); ev.Seq != 1 {
		t.Fatalf("ring %+v", ev)
	}
	select {
	case ev := <-rec1.ch:
		t.Fatalf("replaced ring still called: %+v", ev)
	default:
	}
	if got := l.Stats().Subscriptions; got != 1 {
		t.Fatalf("stats: %d subscriptions", got)
	}
}

func TestRedisHistoryExpires(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{HistoryTTL: time.Second})
	room := redistest.Prefix(t) + ".ttl"
	var last replay.Event
	for i := 1; i <= 3; i++ {
		last = mustAppend(t, l, room, msgN(i))
	}
	if ms, _ := strconv.Atoi(s.MustDo(t, "PTTL", "room:{"+room+"}:log")); ms <= 0 || ms > 1000 {
		t.Fatalf("log PTTL %d ms, want (0, 1000]", ms)
	}
	replaytest.Eventually(t, 10*time.Second, "the room keys expired", func() error {
		if out := s.MustDo(t, "EXISTS", "room:{"+room+"}:seq", "room:{"+room+"}:log"); out != "0" {
			return fmt.Errorf("%s keys still exist", out)
		}
		return nil
	})
	if h, err := l.Head(context.Background(), room); err != nil || h != (replay.Position{}) {
		t.Fatalf("head after expiry: %v %v", h, err)
	}
	if _, _, err := l.Since(context.Background(), room, last.Position(), 10); !errors.Is(err, replay.ErrGap) {
		t.Fatalf("old position on an expired room: %v, want ErrGap", err)
	}
	first := mustAppend(t, l, room, msgN(4))
	if first.Seq != 1 || first.Epoch == last.Epoch {
		t.Fatalf("after expiry: %+v, want seq 1 in a new epoch (old %q)", first, last.Epoch)
	}
	_, head, err := l.Since(context.Background(), room, last.Position(), 10)
	if !errors.Is(err, replay.ErrGap) || head != first.Position() {
		t.Fatalf("old epoch: head %v err %v, want ErrGap at %v", head, err, first.Position())
	}
}

func TestRedisFunctionReloaded(t *testing.T) {
	t.Parallel()
	t.Run("Cluster", func(t *testing.T) {
		// Other tests share this cluster and load the library when they start, so
		// this part checks only that publishing goes on.
		c := redistest.SharedCluster(t)
		l := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
		room := redistest.Prefix(t) + ".fn"
		mustAppend(t, l, room, msgN(1))
		owner := c.NodeForKey(t, "room:{"+room+"}:seq")
		owner.MustDo(t, "FUNCTION", "FLUSH")
		if ev := mustAppend(t, l, room, msgN(2)); ev.Seq != 2 {
			t.Fatalf("after FUNCTION FLUSH: %+v", ev)
		}
		if got := owner.MustDo(t, "FUNCTION", "LIST", "LIBRARYNAME", replay.RedisLibrary); !strings.Contains(got, replay.RedisLibrary) {
			t.Fatalf("library not back on %s: %q", owner.Addr, got)
		}
	})
	t.Run("Standalone", func(t *testing.T) {
		s := redistest.Standalone(t) // its own server: the test counts reloads
		l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
		room := redistest.Prefix(t) + ".fn"
		mustAppend(t, l, room, msgN(1))
		s.MustDo(t, "FUNCTION", "DELETE", replay.RedisLibrary)
		evs, _, err := l.Since(context.Background(), room, replay.Position{}, 10)
		if err != nil || len(evs) != 1 {
			t.Fatalf("since after FUNCTION DELETE: %d events, %v", len(evs), err)
		}
		s.MustDo(t, "FUNCTION", "FLUSH")
		if ev := mustAppend(t, l, room, msgN(2)); ev.Seq != 2 {
			t.Fatalf("after FUNCTION FLUSH: %+v", ev)
		}
		if r := l.Stats().Reloads; r != 2 {
			t.Fatalf("%d reloads, want 2", r)
		}
	})
}

func TestRedisWaitReplicas(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	room := redistest.Prefix(t) + ".wait"

	one := newRedisLog(t, c.Addrs(), replay.RedisConfig{WaitReplicas: 1})
	for i := 1; i <= 3; i++ {
		if ev := mustAppend(t, one, room, msgN(i)); ev.Seq != uint64(i) {
			t.Fatalf("append %d: %+v", i, ev)
		}
	}

	two := newRedisLog(t, c.Addrs(), replay.RedisConfig{WaitReplicas: 2, WaitTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := two.Append(context.Background(), room, msgN(4))
	if !errors.Is(err, replay.ErrUnavailable) || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("two replicas of one: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %s", d)
	}

	s := redistest.SharedStandalone(t)
	alone := newRedisLog(t, s.Addrs(), replay.RedisConfig{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	if _, err := alone.Append(context.Background(), room, msgN(1)); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("standalone without replicas: %v, want ErrUnavailable", err)
	}

	evs, errs := one.AppendBatch(context.Background(), []string{room, room + "b", "bad{room}"}, []replay.Message{msgN(5), msgN(6), msgN(7)})
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], replay.ErrInvalid) {
		t.Fatalf("batch errors %v", errs)
	}
	if evs[1].Seq != 1 || evs[0].Seq < 5 {
		t.Fatalf("batch events %+v", evs)
	}
}

func TestRedisAppendBatch(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	l := newRedisLog(t, c.Addrs(), replay.RedisConfig{})
	p := redistest.Prefix(t)
	var rooms []string
	var msgs []replay.Message
	for i := 0; i < 60; i++ {
		rooms = append(rooms, p+".b"+strconv.Itoa(i%20)) // 20 rooms over the 3 shards
		msgs = append(msgs, msgN(i))
	}
	rooms[7] = "no{pe}"
	msgs[9].Type = "resync"
	dup := replay.Message{Body: json.RawMessage(`"d"`), IdempotencyKey: "k"}
	rooms, msgs = append(rooms, p+".dup", p+".dup"), append(msgs, dup, dup)

	evs, errs := l.AppendBatch(context.Background(), rooms, msgs)
	if len(evs) != len(rooms) || len(errs) != len(rooms) {
		t.Fatalf("%d events, %d errors for %d items", len(evs), len(errs), len(rooms))
	}
	next := map[string]uint64{}
	for i := range rooms {
		switch {
		case i == 7 || i == 9:
			if !errors.Is(errs[i], replay.ErrInvalid) {
				t.Fatalf("item %d: %v, want ErrInvalid", i, errs[i])
			}
			continue
		case errs[i] != nil:
			t.Fatalf("item %d: %v", i, errs[i])
		}
		if rooms[i] == p+".dup" {
			if evs[i].Seq != 1 {
				t.Fatalf("idempotent item %d: %+v", i, evs[i])
			}
			continue
		}
		next[rooms[i]]++
		if evs[i].Seq != next[rooms[i]] || evs[i].Room != rooms[i] || string(evs[i].Body) != string(msgs[i].Body) {
			t.Fatalf("item %d: %+v, want seq %d of %q", i, evs[i], next[rooms[i]], rooms[i])
		}
	}
	got, _, err := l.Since(context.Background(), p+".b3", replay.Position{}, 10)
	if err != nil || len(got) != 3 || string(got[1].Body) != `{"n":23}` {
		t.Fatalf("room b3: %+v %v", got, err)
	}
	if _, errs := l.AppendBatch(context.Background(), rooms[:2], msgs[:1]); !errors.Is(errs[0], replay.ErrInvalid) {
		t.Fatalf("mismatched lengths: %v", errs)
	}
}

func TestRedisReadsAreShared(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t) // its own server: the test counts calls
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	room := redistest.Prefix(t) + ".storm"
	for i := 1; i <= 50; i++ {
		mustAppend(t, l, room, msgN(i))
	}
	calls := func(cmd string) int {
		info, err := s.Info("commandstats")
		if err != nil {
			t.Fatal(err)
		}
		v := info["cmdstat_"+cmd]
		v, _, _ = strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		n, _ := strconv.Atoi(v)
		return n
	}
	sinceBefore, headBefore := calls("fcall_ro"), calls("hmget")
	const readers = 2000
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < readers; i++ {
		wg.Go(func() {
			<-start
			evs, head, err := l.Since(context.Background(), room, replay.Position{Seq: 10}, 256)
			if err != nil || len(evs) != 40 || head.Seq != 50 {
				t.Errorf("since: %d events, head %v, %v", len(evs), head, err)
			}
			if h, err := l.Head(context.Background(), room); err != nil || h.Seq != 50 {
				t.Errorf("head %v %v", h, err)
			}
		})
	}
	close(start)
	wg.Wait()
	sinceCalls, headCalls := calls("fcall_ro")-sinceBefore, calls("hmget")-headBefore
	t.Logf("%d readers: %d since calls, %d head calls", readers, sinceCalls, headCalls)
	if sinceCalls > readers/10 || headCalls > readers/10 {
		t.Fatalf("%d readers made %d since and %d head calls", readers, sinceCalls, headCalls)
	}
}

func TestRedisTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t) // its own server: the test pauses it
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{Timeout: 200 * time.Millisecond})
	room := redistest.Prefix(t) + ".pause"
	m := msgN(1)
	m.IdempotencyKey = "k1"
	first := mustAppend(t, l, room, m)

	s.MustDo(t, "CLIENT", "PAUSE", "3000", "ALL")
	paused := time.Now()
	checks := []struct {
		name string
		call func() error
	}{
		{"append", func() error { _, err := l.Append(context.Background(), room, msgN(2)); return err }},
		{"append idempotent", func() error { _, err := l.Append(context.Background(), room, m); return err }},
		{"since", func() error { _, _, err := l.Since(context.Background(), room, replay.Position{}, 10); return err }},
		{"head", func() error { _, err := l.Head(context.Background(), room); return err }},
		{"ping", func() error { return l.Ping(context.Background()) }},
	}
	for _, tc := range checks {
		start := time.Now()
		err := tc.call()
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %s", tc.name, d)
		}
		if !errors.Is(err, replay.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s while paused: %v, want ErrUnavailable", tc.name, err)
		}
	}
	if time.Since(paused) > 2800*time.Millisecond {
		t.Fatal("the checks outlasted the pause; the test proves nothing")
	}
	// Once the pause ends everything works again, and the idempotent retry still
	// answers with the first event.
	replaytest.Eventually(t, 10*time.Second, "a ping after the pause", func() error { return l.Ping(context.Background()) })
	again, err := l.Append(context.Background(), room, m)
	if err != nil || again.Seq != first.Seq {
		t.Fatalf("idempotent append after the pause: %+v %v, want seq %d", again, err, first.Seq)
	}
}

func TestRedisConfigAndConnect(t *testing.T) {
	t.Parallel()
	bad := []replay.RedisConfig{
		{},
		{Addrs: []string{"127.0.0.1:1"}, History: -1},
		{Addrs: []string{"127.0.0.1:1"}, HistoryTTL: time.Microsecond},
		{Addrs: []string{"127.0.0.1:1"}, WaitReplicas: 1, WaitTimeout: 3 * time.Second},
		{Addrs: []string{"127.0.0.1:1"}, WaitReplicas: -1},
	}
	for i, cfg := range bad {
		if _, err := replay.NewRedisLog(context.Background(), cfg); err == nil || errors.Is(err, replay.ErrUnavailable) {
			t.Errorf("config %d: %v, want a config error", i, err)
		}
	}
	// Nothing listens on a port just freed: the log starts, and its calls fail fast
	// as unavailable (TestRedisConnectsInTheBackground follows it further).
	redistest.Require(t)
	s := redistest.Standalone(t)
	addr := s.Addr
	_, _ = s.Do("SHUTDOWN", "NOSAVE")
	start := time.Now()
	l := newRedisLog(t, []string{addr}, replay.RedisConfig{Timeout: 300 * time.Millisecond})
	_, err := l.Append(context.Background(), "r", msgN(1))
	if !errors.Is(err, replay.ErrUnavailable) || time.Since(start) > 3*time.Second {
		t.Fatalf("connect to nothing: %v after %s", err, time.Since(start))
	}
}

func TestRedisValidatesBeforeRedis(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	ctx := context.Background()
	if _, _, err := l.Since(ctx, "a}b", replay.Position{}, 1); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("since: %v", err)
	}
	if _, err := l.Head(ctx, "a{b"); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("head: %v", err)
	}
	if err := l.Subscribe(ctx, "", func(replay.Event) {}); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("subscribe: %v", err)
	}
	long := replay.Message{Body: json.RawMessage(`1`), IdempotencyKey: strings.Repeat("k", replay.MaxIdempotencyKeyLen+1)}
	if _, err := l.Append(ctx, "r", long); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("long idempotency key: %v", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Subscribe(ctx, "r", func(replay.Event) {}); !errors.Is(err, replay.ErrClosed) {
		t.Errorf("subscribe after close: %v", err)
	}
	if err := l.Ping(ctx); !errors.Is(err, replay.ErrClosed) {
		t.Errorf("ping after close: %v", err)
	}
	if _, errs := l.AppendBatch(ctx, []string{"r"}, []replay.Message{msgN(1)}); !errors.Is(errs[0], replay.ErrClosed) {
		t.Errorf("batch after close: %v", errs)
	}
}

func BenchmarkRedisAppend(b *testing.B) {
	c := redistest.SharedCluster(b)
	m := replay.Message{Body: json.RawMessage(`{"text":"hello, room","n":12345}`)}
	for _, bc := range []struct {
		name string
		cfg  replay.RedisConfig
	}{
		{"NoWait", replay.RedisConfig{}},
		{"WaitOneReplica", replay.RedisConfig{WaitReplicas: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := newRedisLog(b, c.Addrs(), bc.cfg)
			p := redistest.Prefix(b)
			const rooms = 256
			var mu sync.Mutex
			i := 0
			b.SetParallelism(32) // 32 goroutines per core: auto-pipelining needs concurrency
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				room := p + ".r" + strconv.Itoa(i%rooms)
				i++
				mu.Unlock()
				for pb.Next() {
					if _, err := l.Append(context.Background(), room, m); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
