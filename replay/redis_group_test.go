package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// Group commit: Appends that arrive while a flush runs go out together in the next
// one, one round trip per node, each still one FCALL with its own answer.

// cmdCalls reads a command's call count from INFO commandstats.
func cmdCalls(t testing.TB, n *redistest.Node, cmd string) int {
	t.Helper()
	m, err := n.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m["cmdstat_"+cmd]
	if !ok {
		return 0
	}
	for _, f := range strings.Split(v, ",") {
		if s, ok := strings.CutPrefix(f, "calls="); ok {
			c, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("commandstats %s: %q", cmd, v)
			}
			return c
		}
	}
	t.Fatalf("commandstats %s: %q", cmd, v)
	return 0
}

// heldFlush pauses writes on node, starts appends (one goroutine each), waits until
// the log holds all of them (one flush stuck on the paused node, the rest queued
// behind it), and lifts the pause. It returns each append's result, in order.
func heldFlush(t *testing.T, l *replay.RedisLog, node *redistest.Node, rooms []string, msgs []replay.Message) ([]replay.Event, []error) {
	t.Helper()
	node.MustDo(t, "CLIENT", "PAUSE", "20000", "WRITE")
	unpaused := false
	defer func() {
		if !unpaused {
			_, _ = node.Do("CLIENT", "UNPAUSE")
		}
	}()
	evs, errs := make([]replay.Event, len(rooms)), make([]error, len(rooms))
	var wg sync.WaitGroup
	for i := range rooms {
		wg.Go(func() {
			evs[i], errs[i] = l.Append(context.Background(), rooms[i], msgs[i])
		})
	}
	replaytest.Eventually(t, 10*time.Second, "every append held by the log", func() bool {
		return replay.GroupPending(l) == len(rooms)
	})
	node.MustDo(t, "CLIENT", "UNPAUSE")
	unpaused = true
	wg.Wait()
	return evs, errs
}

func TestRedisGroupCommitCoalesces(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		log  func(t *testing.T) (*replay.RedisLog, func(room string) *redistest.Node)
	}{
		{"Standalone", func(t *testing.T) (*replay.RedisLog, func(string) *redistest.Node) {
			s := redistest.Standalone(t)
			return newRedisLog(t, s.Addrs(), replay.RedisConfig{Timeout: 10 * time.Second}),
				func(string) *redistest.Node { return s.Node }
		}},
		{"Cluster", func(t *testing.T) (*replay.RedisLog, func(string) *redistest.Node) {
			c := redistest.StartCluster(t, redistest.ClusterConfig{})
			return newRedisLog(t, c.Addrs(), replay.RedisConfig{Timeout: 10 * time.Second}),
				func(room string) *redistest.Node { return c.NodeForKey(t, "room:{"+room+"}") }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, nodeOf := tc.log(t)
			room := redistest.Prefix(t)
			mustAppend(t, l, room, msgN(0)) // the library is loaded and the room exists
			const n = 32
			rooms, msgs := make([]string, n), make([]replay.Message, n)
			for i := range rooms {
				rooms[i], msgs[i] = room, msgN(i+1)
			}
			before := l.Stats().GroupFlushes
			fcalls := cmdCalls(t, nodeOf(room), "fcall")
			_, errs := heldFlush(t, l, nodeOf(room), rooms, msgs)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
			}
			// One flush was stuck on the pause; everything that queued behind it went
			// out together in the next.
			if got := l.Stats().GroupFlushes - before; got < 1 || got > 2 {
				t.Errorf("%d appends took %d flushes, want 1 or 2", n, got)
			}
			// Still one FCALL per event: seq, append and doorbell stay atomic.
			if got := cmdCalls(t, nodeOf(room), "fcall") - fcalls; got != n {
				t.Errorf("%d appends ran %d FCALLs, want %d", n, got, n)
			}
			checkDense(t, l, room, n+1)
		})
	}
}

// checkDense reads the room's log and checks seqs 1..want, each once.
func checkDense(t *testing.T, l replay.Log, room string, want int) {
	t.Helper()
	evs, head, err := l.Since(context.Background(), room, replay.Position{}, want+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != want || head.Seq != uint64(want) {
		t.Fatalf("room %s holds %d events up to seq %d, want %d", room, len(evs), head.Seq, want)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
}

func TestRedisGroupCommitOrderUnderConcurrency(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		addrs func(t *testing.T) []string
		cfg   replay.RedisConfig
	}{
		{"Standalone", func(t *testing.T) []string { return redistest.SharedStandalone(t).Addrs() }, replay.RedisConfig{}},
		{"Cluster", func(t *testing.T) []string { return redistest.SharedCluster(t).Addrs() }, replay.RedisConfig{}},
		{"ClusterWaitOneReplica", func(t *testing.T) []string { return redistest.SharedCluster(t).Addrs() }, replay.RedisConfig{WaitReplicas: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newRedisLog(t, tc.addrs(t), tc.cfg)
			prefix := redistest.Prefix(t)
			const publishers, rooms, each = 8, 6, 15
			// seqs[p][r]: the seqs publisher p saw for room r, in the order it saw them.
			var seqs [publishers][rooms][]uint64
			var wg sync.WaitGroup
			for p := range publishers {
				wg.Go(func() {
					for i := range each {
						for r := range rooms {
							ev, err := l.Append(context.Background(), prefix+strconv.Itoa(r),
								replay.Message{Body: json.RawMessage(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i))})
							if err != nil {
								t.Errorf("publisher %d room %d: %v", p, r, err)
								return
							}
							seqs[p][r] = append(seqs[p][r], ev.Seq)
						}
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			for r := range rooms {
				seen := map[uint64]int{}
				for p := range publishers {
					for i, s := range seqs[p][r] {
						if i > 0 && s <= seqs[p][r][i-1] {
							t.Errorf("room %d: publisher %d saw seq %d after %d", r, p, s, seqs[p][r][i-1])
						}
						seen[s]++
					}
				}
				for s := uint64(1); s <= publishers*each; s++ {
					if seen[s] != 1 {
						t.Errorf("room %d: seq %d assigned %d times", r, s, seen[s])
					}
				}
				room := prefix + strconv.Itoa(r)
				evs, _, err := l.Since(context.Background(), room, replay.Position{}, publishers*each+1)
				if err != nil {
					t.Fatal(err)
				}
				// The log holds each publisher's events in the order it sent them.
				last := map[int]int{}
				for _, ev := range evs {
					var b struct{ P, I int }
					if err := json.Unmarshal(ev.Body, &b); err != nil {
						t.Fatal(err)
					}
					if prev, ok := last[b.P]; ok && b.I != prev+1 {
						t.Errorf("room %d: publisher %d event %d stored after %d", r, b.P, b.I, prev)
					}
					last[b.P] = b.I
				}
				checkDense(t, l, room, publishers*each)
			}
		})
	}
}

func TestRedisGroupCommitConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Standalone", "Cluster"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var addrs []string
			if name == "Standalone" {
				addrs = redistest.SharedStandalone(t).Addrs()
			} else {
				addrs = redistest.SharedCluster(t).Addrs()
			}
			l := newRedisLog(t, addrs, replay.RedisConfig{})
			room := redistest.Prefix(t)
			const n = 24
			evs := make([]replay.Event, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					// Two keys, each sent by half of the publishers at once.
					m := replay.Message{Body: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`), IdempotencyKey: "k" + strconv.Itoa(i%2)}
					var err error
					if evs[i], err = l.Append(context.Background(), room, m); err != nil {
						t.Errorf("append %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			bykey := map[int]uint64{}
			for i, ev := range evs {
				if s, ok := bykey[i%2]; ok && s != ev.Seq {
					t.Errorf("key k%d answered seq %d and %d", i%2, s, ev.Seq)
				}
				bykey[i%2] = ev.Seq
			}
			if bykey[0] == bykey[1] {
				t.Errorf("two keys share seq %d", bykey[0])
			}
			checkDense(t, l, room, 2)
		})
	}
}

func TestRedisGroupCommitWaitsOncePerFlush(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterConfig{})
	l := newRedisLog(t, c.Addrs(), replay.RedisConfig{WaitReplicas: 1, Timeout: 10 * time.Second})
	primaries := c.Primaries(t)
	waits := func() int {
		n := 0
		for _, p := range primaries {
			n += cmdCalls(t, p, "wait")
		}
		return n
	}

	t.Run("Single", func(t *testing.T) {
		room := redistest.Prefix(t)
		mustAppend(t, l, room, msgN(0))
		primary := c.NodeForKey(t, "room:{"+room+"}")
		const n = 32
		rooms, msgs := make([]string, n), make([]replay.Message, n)
		for i := range rooms {
			rooms[i], msgs[i] = room, msgN(i+1)
		}
		before := waits()
		_, errs := heldFlush(t, l, primary, rooms, msgs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
		// Every append succeeded, so the WAIT that covered it saw the replica: an
		// event is acknowledged only then (TestRedisWaitReplicas checks the refusal).
		if got := waits() - before; got < 1 || got > 2 {
			t.Errorf("%d appends to one room ran WAIT %d times, want once per flush (1 or 2)", n, got)
		}
	})

	t.Run("Batch", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		const n, nrooms = 90, 30
		rooms, msgs := make([]string, n), make([]replay.Message, n)
		for i := range rooms {
			rooms[i], msgs[i] = prefix+strconv.Itoa(i%nrooms), msgN(i)
		}
		before := waits()
		evs, errs := l.AppendBatch(context.Background(), rooms, msgs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
			if want := uint64(i/nrooms + 1); evs[i].Seq != want {
				t.Fatalf("item %d: seq %d, want %d", i, evs[i].Seq, want)
			}
		}
		if got := waits() - before; got < 1 || got > len(primaries) {
			t.Errorf("a batch of %d over %d rooms ran WAIT %d times, want at most once per primary (%d)", n, nrooms, got, len(primaries))
		}
	})
}

func TestRedisGroupCommitOneFailureFailsOnePublish(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t)
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{Timeout: 10 * time.Second})
	prefix := redistest.Prefix(t)
	good, bad := prefix+"good", prefix+"bad"
	mustAppend(t, l, good, msgN(0))
	// A head of the wrong type: the function's first read of it fails.
	s.MustDo(t, "SET", "room:{"+bad+"}:seq", "not a hash")
	rooms := []string{good, good, bad, good, good}
	msgs := []replay.Message{msgN(1), msgN(2), msgN(3), msgN(4), msgN(5)}
	evs, errs := heldFlush(t, l, s.Node, rooms, msgs)
	for i, err := range errs {
		switch {
		case rooms[i] == bad && err == nil:
			t.Errorf("append to the broken room succeeded: %+v", evs[i])
		case rooms[i] == bad && (errors.Is(err, replay.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "WRONGTYPE")):
			t.Errorf("append to the broken room: %v, want its own WRONGTYPE answer", err)
		case rooms[i] == good && err != nil:
			t.Errorf("append %d to the good room: %v", i, err)
		}
	}
	checkDense(t, l, good, 5)
}
