package flight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// joins counts the callers that joined each kind of call of g, and lets a test wait
// until n of them have.
type joins struct {
	mu      sync.Mutex
	started int // callers that started a call
	queued  int // callers that wait for the next call
	changed chan struct{}
}

func watch[T any](g *Group[T]) *joins {
	j := &joins{changed: make(chan struct{}, 1)}
	g.joined = func(_ string, next bool) {
		j.mu.Lock()
		if next {
			j.queued++
		} else {
			j.started++
		}
		j.mu.Unlock()
		select {
		case j.changed <- struct{}{}:
		default:
		}
	}
	return j
}

// await returns once at least started callers started a call and queued callers
// wait for the next one.
func (j *joins) await(t *testing.T, started, queued int) {
	t.Helper()
	for {
		j.mu.Lock()
		ok := j.started >= started && j.queued >= queued
		j.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-j.changed:
		case <-t.Context().Done():
			t.Fatal("test ended while waiting for callers to join")
		}
	}
}

// spawnAll starts every run on a goroutine that wg counts.
func spawnAll(wg *sync.WaitGroup) func(func()) bool {
	return func(fn func()) bool {
		wg.Go(fn)
		return true
	}
}

func (g *Group[T]) keys() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.calls)
}

// A caller that arrives while a call runs gets a call that starts after it: the
// running one may have read the backend before what the caller was told about
// existed.
func TestNeverAnOlderCallsResult(t *testing.T) {
	for _, spawned := range []bool{true, false} {
		name := map[bool]string{true: "Spawn", false: "GoStatement"}[spawned]
		t.Run(name, func(t *testing.T) {
			var g Group[int64]
			j := watch(&g)
			var wg sync.WaitGroup
			spawn := spawnAll(&wg)
			if !spawned {
				spawn = nil
			}
			var state atomic.Int64 // what the backend holds
			started := make(chan struct{}, 2)
			release := make(chan struct{})
			fn := func() (int64, error) {
				v := state.Load()
				started <- struct{}{}
				<-release
				return v, nil
			}
			first := make(chan int64, 1)
			go func() {
				v, err := g.Do(context.Background(), "k", spawn, fn)
				if err != nil {
					t.Error(err)
				}
				first <- v
			}()
			<-started    // the first call has read state 0
			state.Add(1) // something changes; a reader is told and asks
			second := make(chan int64, 1)
			go func() {
				v, err := g.Do(context.Background(), "k", spawn, fn)
				if err != nil {
					t.Error(err)
				}
				second <- v
			}()
			j.await(t, 1, 1) // the second caller waits for the next call
			close(release)
			if v := <-first; v != 0 {
				t.Fatalf("first caller got %d, want 0", v)
			}
			if v := <-second; v != 1 {
				t.Fatalf("the later caller got %d, from a call that started before it; want 1", v)
			}
			wg.Wait()
			if n := g.keys(); n != 0 {
				t.Fatalf("%d keys left after every call ended", n)
			}
		})
	}
}

// A storm of callers of one key costs at most two calls in sequence: the one
// running when they arrive, and one shared by all of them.
func TestStormCostsTwoCalls(t *testing.T) {
	var g Group[int]
	j := watch(&g)
	var wg sync.WaitGroup
	var calls, running atomic.Int64
	release := make(chan struct{})
	fn := func() (int, error) {
		if running.Add(1) != 1 {
			t.Error("two calls of one key ran at once")
		}
		defer running.Add(-1)
		n := calls.Add(1)
		<-release
		return int(n), nil
	}
	const storm = 200
	results := make(chan int, storm+1)
	var callers sync.WaitGroup
	ask := func() {
		callers.Go(func() {
			v, err := g.Do(context.Background(), "room", spawnAll(&wg), fn)
			if err != nil {
				t.Error(err)
			}
			results <- v
		})
	}
	ask()
	j.await(t, 1, 0)
	for range storm {
		ask()
	}
	j.await(t, 1, storm)
	close(release)
	callers.Wait()
	wg.Wait()
	close(results)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d callers made %d calls, want 2", storm+1, n)
	}
	got := map[int]int{}
	for v := range results {
		got[v]++
	}
	if got[1] != 1 || got[2] != storm {
		t.Fatalf("results by call: %v; want the first caller on call 1, the %d others on call 2", got, storm)
	}
	if n := g.keys(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// The queued call runs what the caller that queued it asked, and keys do not wait
// for each other.
func TestKeysAreIndependent(t *testing.T) {
	var g Group[string]
	j := watch(&g)
	var wg sync.WaitGroup
	release := make(chan struct{})
	a := make(chan string, 1)
	go func() {
		v, _ := g.Do(context.Background(), "a", spawnAll(&wg), func() (string, error) { <-release; return "a1", nil })
		a <- v
	}()
	j.await(t, 1, 0)
	v, err := g.Do(context.Background(), "b", spawnAll(&wg), func() (string, error) { return "b1", nil })
	if err != nil || v != "b1" {
		t.Fatalf("key b while a runs: %q, %v", v, err)
	}
	queued := make(chan string, 1)
	go func() {
		v, _ := g.Do(context.Background(), "a", spawnAll(&wg), func() (string, error) { return "a2", nil })
		queued <- v
	}()
	j.await(t, 2, 1)
	close(release)
	if v := <-a; v != "a1" {
		t.Fatalf("first call of a: %q", v)
	}
	if v := <-queued; v != "a2" {
		t.Fatalf("queued call of a: %q, want the fn of the caller that queued it", v)
	}
	wg.Wait()
}

// A caller that gives up returns at once; the call goes on for the others, and an
// error is shared like a value.
func TestCallerGivesUp(t *testing.T) {
	var g Group[int]
	j := watch(&g)
	var wg sync.WaitGroup
	release := make(chan struct{})
	boom := errors.New("boom")
	fn := func() (int, error) { <-release; return 0, boom }
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "k", spawnAll(&wg), fn)
		gaveUp <- err
	}()
	j.await(t, 1, 0)
	stays := make(chan error, 1)
	go func() {
		_, err := g.Do(context.Background(), "k", spawnAll(&wg), fn)
		stays <- err
	}()
	j.await(t, 1, 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller that gave up: %v", err)
	}
	close(release)
	if err := <-stays; !errors.Is(err, boom) {
		t.Fatalf("caller that stayed: %v, want the call's error", err)
	}
	wg.Wait()
}

// A spawn that refuses runs nothing, and leaves nothing behind.
func TestSpawnRefused(t *testing.T) {
	var g Group[int]
	refuse := func(func()) bool { return false }
	ran := false
	_, err := g.Do(context.Background(), "k", refuse, func() (int, error) { ran = true; return 1, nil })
	if !errors.Is(err, ErrRefused) || ran {
		t.Fatalf("refused: err %v, ran %v", err, ran)
	}
	if n := g.keys(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
	if v, err := g.Do(context.Background(), "k", nil, func() (int, error) { return 7, nil }); err != nil || v != 7 {
		t.Fatalf("after a refusal: %d, %v", v, err)
	}
}
