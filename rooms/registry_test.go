package rooms

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestNewValidates(t *testing.T) {
	l := newMemoryLog(t, replay.MemoryConfig{})
	ok := Config{}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	tests := []struct {
		name    string
		bus     Bus
		log     Log
		cfg     Config
		wantErr bool
	}{
		{name: "defaults", bus: l, log: l, cfg: ok},
		{name: "negative linger unsubscribes at once", bus: l, log: l, cfg: with(func(c *Config) { c.Linger = -1 })},
		{name: "nil bus", log: l, cfg: ok, wantErr: true},
		{name: "nil log", bus: l, cfg: ok, wantErr: true},
		{name: "negative queue", bus: l, log: l, cfg: with(func(c *Config) { c.Queue = -1 }), wantErr: true},
		{name: "negative queue bytes", bus: l, log: l, cfg: with(func(c *Config) { c.QueueBytes = -1 }), wantErr: true},
		{name: "negative repair batch", bus: l, log: l, cfg: with(func(c *Config) { c.RepairBatch = -1 }), wantErr: true},
		{name: "negative io timeout", bus: l, log: l, cfg: with(func(c *Config) { c.IOTimeout = -1 }), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(tt.bus, tt.log, tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New: err %v, want error %v", err, tt.wantErr)
			}
			if g != nil {
				if err := g.Close(context.Background()); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
		})
	}
}

func TestReasonString(t *testing.T) {
	tests := []struct {
		r    Reason
		want string
	}{
		{0, "open"},
		{ReasonClientGone, "client_gone"},
		{ReasonSlowConsumer, "slow_consumer"},
		{ReasonWriteFailed, "write_failed"},
		{ReasonShed, "shed"},
		{ReasonShutdown, "shutdown"},
		{ReasonUnavailable, "unavailable"},
		{ReasonReauth, "reauth"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.r.String(); got != tt.want {
				t.Fatalf("Reason(%d).String() = %q, want %q", tt.r, got, tt.want)
			}
		})
	}
	if len(Reasons) != len(tests)-1 {
		t.Fatalf("Reasons lists %d reasons, want %d", len(Reasons), len(tests)-1)
	}
}

// joinAll starts n concurrent Joins of room and returns their results once all end.
func joinAll(ctx context.Context, g *Registry, room string, n int) (chan []*Member, chan []error) {
	ms, errs := make(chan []*Member, 1), make(chan []error, 1)
	go func() {
		var wg sync.WaitGroup
		members := make([]*Member, n)
		failures := make([]error, n)
		for i := range n {
			wg.Go(func() { members[i], failures[i] = g.Join(ctx, room) })
		}
		wg.Wait()
		ms <- members
		errs <- failures
	}()
	return ms, errs
}

func TestJoinCoalescesSubscribe(t *testing.T) {
	const joiners = 50
	l, bus, g := setup(t, replay.MemoryConfig{}, Config{})
	release := bus.holdSubscribe()
	defer release()

	ms, errs := joinAll(context.Background(), g, "lobby", joiners)
	// Hold the subscribe until every joiner waits on it, so all share the pending one.
	replaytest.Eventually(t, waitLimit, "every joiner to wait on the pending subscribe", func() bool { return roomRefs(g, "lobby") == joiners })
	release()
	members := await(t, ms, "joins")
	for i, err := range await(t, errs, "join errors") {
		if err != nil {
			t.Fatalf("joiner %d: %v", i, err)
		}
	}

	if c := bus.counts(); c.Subs != 1 || c.Live != 1 {
		t.Fatalf("bus: %+v, want exactly one subscribe, held", c)
	}
	if st := g.Stats(); st.Members != joiners || st.Rooms != 1 || st.Subscriptions != 1 {
		t.Fatalf("Stats = %+v, want %d members in 1 room on 1 subscription", st, joiners)
	}
	ev := publish(t, l, "lobby", 1)
	for _, m := range members {
		expectEvents(t, m, ev.Epoch, 1, 1)
		expectEmpty(t, m)
	}
}

func TestJoinRollsBackFailedSubscribe(t *testing.T) {
	t.Run("subscribe fails", func(t *testing.T) {
		const joiners = 10
		l, bus, g := setup(t, replay.MemoryConfig{}, Config{})
		release := bus.holdSubscribe()
		defer release()
		bus.failSubscribe(errBoom)

		_, errs := joinAll(context.Background(), g, "lobby", joiners)
		replaytest.Eventually(t, waitLimit, "every joiner to wait on the pending subscribe", func() bool { return roomRefs(g, "lobby") == joiners })
		release()
		for i, err := range await(t, errs, "join errors") {
			if !errors.Is(err, errBoom) {
				t.Fatalf("joiner %d: err %v, want %v", i, err, errBoom)
			}
		}
		if refs := roomRefs(g, "lobby"); refs != -1 {
			t.Fatalf("room still registered with %d refs after a failed subscribe", refs)
		}
		if st := g.Stats(); st != (Stats{}) {
			t.Fatalf("Stats = %+v after a failed subscribe, want zero", st)
		}
		if c := bus.counts(); c.Subs != 1 || c.Unsubs != 0 || c.Live != 0 {
			t.Fatalf("bus: %+v, want one failed subscribe and nothing held", c)
		}

		bus.failSubscribe(nil)
		m := join(t, g, "lobby")
		if c := bus.counts(); c.Subs != 2 || c.Live != 1 {
			t.Fatalf("bus: %+v, want a second subscribe, held", c)
		}
		ev := publish(t, l, "lobby", 1)
		expectEvents(t, m, ev.Epoch, 1, 1)
	})

	t.Run("head fails", func(t *testing.T) {
		l := newMemoryLog(t, replay.MemoryConfig{})
		bus := newFakeBus(l)
		g := newRegistry(t, bus, failingHeadLog{l, errBoom}, Config{})
		if _, err := g.Join(context.Background(), "lobby"); !errors.Is(err, errBoom) {
			t.Fatalf("Join: err %v, want %v", err, errBoom)
		}
		if c := bus.counts(); c.Subs != 1 || c.Unsubs != 1 || c.Live != 0 {
			t.Fatalf("bus: %+v, want the subscription released", c)
		}
		if st := g.Stats(); st != (Stats{}) {
			t.Fatalf("Stats = %+v, want zero", st)
		}
	})
}

func TestLinger(t *testing.T) {
	t.Run("last leave unsubscribes after the linger", func(t *testing.T) {
		const linger = 20 * time.Millisecond
		_, bus, g := setup(t, replay.MemoryConfig{}, Config{Linger: linger})
		m := join(t, g, "lobby")
		left := time.Now()
		g.Leave(m)
		if m.Reason() != ReasonClientGone {
			t.Fatalf("Reason after Leave = %s, want %s", m.Reason(), ReasonClientGone)
		}
		await(t, bus.unsubscribed, "unsubscribe")
		if waited := time.Since(left); waited < linger {
			t.Fatalf("unsubscribed %s after the last leave, before the %s linger", waited, linger)
		}
		if c := bus.counts(); c.Subs != 1 || c.Unsubs != 1 || c.Live != 0 {
			t.Fatalf("bus: %+v, want one subscribe and one unsubscribe", c)
		}
		replaytest.Eventually(t, waitLimit, "the room to be forgotten", func() bool { return g.Stats() == Stats{} })
	})

	t.Run("negative linger unsubscribes at once", func(t *testing.T) {
		_, bus, g := setup(t, replay.MemoryConfig{}, Config{Linger: -1})
		g.Leave(join(t, g, "lobby"))
		await(t, bus.unsubscribed, "unsubscribe")
	})

	t.Run("join during the linger keeps the subscription", func(t *testing.T) {
		// Long enough that the Join below surely lands inside it.
		const linger = 100 * time.Millisecond
		l, bus, g := setup(t, replay.MemoryConfig{}, Config{Linger: linger})
		g.Leave(join(t, g, "lobby"))
		m := join(t, g, "lobby")
		quiet(t, bus.unsubscribed, linger+linger/2, "unsubscribe while a member is in the room")
		if c := bus.counts(); c.Subs != 1 || c.Unsubs != 0 {
			t.Fatalf("bus: %+v, want the first subscription kept", c)
		}
		ev := publish(t, l, "lobby", 1)
		expectEvents(t, m, ev.Epoch, 1, 1)

		// The next last leave starts a fresh linger.
		left := time.Now()
		g.Leave(m)
		await(t, bus.unsubscribed, "unsubscribe")
		if waited := time.Since(left); waited < linger {
			t.Fatalf("unsubscribed %s after the last leave, before the %s linger", waited, linger)
		}
		if c := bus.counts(); c.Subs != 1 || c.Unsubs != 1 {
			t.Fatalf("bus: %+v, want one subscribe and one unsubscribe", c)
		}
	})

	t.Run("join after expiry waits for the unsubscribe", func(t *testing.T) {
		l, bus, g := setup(t, replay.MemoryConfig{}, Config{Linger: 20 * time.Millisecond})
		release := bus.holdUnsubscribe()
		defer release()
		g.Leave(join(t, g, "lobby"))
		await(t, bus.subEntered, "first subscribe")
		await(t, bus.unsubEntered, "the linger to expire")

		joined := make(chan *Member, 1)
		go func() {
			m, err := g.Join(context.Background(), "lobby")
			if err != nil {
				t.Errorf("Join: %v", err)
			}
			joined <- m
		}()
		quiet(t, joined, 50*time.Millisecond, "join before the previous unsubscribe finished")
		quiet(t, bus.subEntered, 0, "subscribe while the previous unsubscribe is in flight")
		release()
		m := await(t, joined, "join")
		if m == nil {
			t.FailNow()
		}
		c := bus.counts()
		if c.Subs != 2 || c.Unsubs != 1 || c.Live != 1 || c.Overlap {
			t.Fatalf("bus: %+v, want subscribe, unsubscribe, subscribe, never two at once", c)
		}
		ev := publish(t, l, "lobby", 1)
		expectEvents(t, m, ev.Epoch, 1, 1)
	})
}

func TestJoinCancelled(t *testing.T) {
	t.Run("while subscribe blocks", func(t *testing.T) {
		_, bus, g := setup(t, replay.MemoryConfig{}, Config{Linger: 20 * time.Millisecond})
		release := bus.holdSubscribe()
		defer release()

		ctx, cancel := context.WithCancel(context.Background())
		failed := make(chan error, 1)
		go func() {
			_, err := g.Join(ctx, "lobby")
			failed <- err
		}()
		await(t, bus.subEntered, "subscribe")
		cancel()
		if err := await(t, failed, "join to give up"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Join: err %v, want %v", err, context.Canceled)
		}

		// The subscribe completes with nobody left to use it: the room lingers out.
		release()
		await(t, bus.unsubscribed, "unsubscribe of the abandoned room")
		if c := bus.counts(); c.Subs != 1 || c.Unsubs != 1 || c.Live != 0 {
			t.Fatalf("bus: %+v, want the subscription released", c)
		}
		replaytest.Eventually(t, waitLimit, "the room to be forgotten", func() bool { return g.Stats() == Stats{} })
	})

	t.Run("while the previous unsubscribe is in flight", func(t *testing.T) {
		_, bus, g := setup(t, replay.MemoryConfig{}, Config{Linger: -1})
		release := bus.holdUnsubscribe()
		defer release()
		g.Leave(join(t, g, "lobby"))
		await(t, bus.unsubEntered, "unsubscribe")

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := g.Join(ctx, "lobby"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Join: err %v, want %v", err, context.DeadlineExceeded)
		}
		release()
		await(t, bus.unsubscribed, "unsubscribe")
		if c := bus.counts(); c.Subs != 1 || c.Live != 0 {
			t.Fatalf("bus: %+v, want no new subscription", c)
		}
	})
}

func TestClose(t *testing.T) {
	t.Run("closes members and releases subscriptions", func(t *testing.T) {
		l := newMemoryLog(t, replay.MemoryConfig{})
		bus := newFakeBus(l)
		g, err := New(bus, l, Config{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		var members []*Member
		for i := range 5 {
			for range 3 {
				members = append(members, join(t, g, roomName("room", i)))
			}
		}
		// A lingering room holds a subscription without members.
		g.Leave(join(t, g, "lingering"))

		if err := g.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for _, m := range members {
			select {
			case <-m.Done():
			default:
				t.Fatalf("member of %q still open after Close", m.Room())
			}
			if m.Reason() != ReasonShutdown {
				t.Fatalf("member of %q closed with %s, want %s", m.Room(), m.Reason(), ReasonShutdown)
			}
		}
		if c := bus.counts(); c.Subs != 6 || c.Unsubs != 6 || c.Live != 0 {
			t.Fatalf("bus: %+v, want every subscription released", c)
		}
		if st := g.Stats(); st.Subscriptions != 0 || st.Rooms != 0 {
			t.Fatalf("Stats = %+v, want no rooms or subscriptions", st)
		}
		if _, err := g.Join(context.Background(), "room-0"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Join after Close: err %v, want %v", err, ErrClosed)
		}
		for _, m := range members { // streams still leave after the close
			g.Leave(m)
		}
		if st := g.Stats(); st.Members != 0 {
			t.Fatalf("Stats = %+v after every member left, want no members", st)
		}
		if err := g.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})

	t.Run("while a subscribe is pending", func(t *testing.T) {
		l := newMemoryLog(t, replay.MemoryConfig{})
		bus := newFakeBus(l)
		g, err := New(bus, l, Config{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		release := bus.holdSubscribe()
		defer release()
		failed := make(chan error, 1)
		go func() {
			_, err := g.Join(context.Background(), "lobby")
			failed <- err
		}()
		await(t, bus.subEntered, "subscribe")

		closed := make(chan error, 1)
		go func() { closed <- g.Close(context.Background()) }()
		// Close waits for the pending subscribe, then releases it.
		quiet(t, closed, 20*time.Millisecond, "Close returning while a subscribe is pending")
		release()
		if err := await(t, closed, "Close"); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := await(t, failed, "join"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Join: err %v, want %v", err, ErrClosed)
		}
		if c := bus.counts(); c.Subs != 1 || c.Unsubs != 1 || c.Live != 0 {
			t.Fatalf("bus: %+v, want the late subscription released", c)
		}
	})

	t.Run("ctx ends while a subscribe is pending", func(t *testing.T) {
		l := newMemoryLog(t, replay.MemoryConfig{})
		bus := newFakeBus(l)
		g, err := New(bus, l, Config{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		release := bus.holdSubscribe()
		defer release()
		failed := make(chan error, 1)
		go func() {
			_, err := g.Join(context.Background(), "lobby")
			failed <- err
		}()
		await(t, bus.subEntered, "subscribe")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := g.Close(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close: err %v, want %v", err, context.Canceled)
		}
		release()
		if err := await(t, failed, "join"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Join: err %v, want %v", err, ErrClosed)
		}
		// The registry's goroutines still end; TestMain checks for leaks, and the
		// subscription that completed late is released.
		await(t, bus.unsubscribed, "unsubscribe")
	})
}
