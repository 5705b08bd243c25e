package replay_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// control is what both backends offer the fleet's access control.
type control struct {
	replay.Tickets
	replay.Revocations
}

// accessControl is log's tickets and revocations.
func accessControl(t testing.TB, log replay.Log) control {
	c := controlOf(t, log)
	return control{c.Tickets, c.Revocations}
}

// controlEnv is one backend for the control suite: two handles on one shared store
// (two RedisLogs on one Redis; for memory, the same log twice), its clock, and a way
// to let time pass.
type controlEnv struct {
	a, b control
	now  func() time.Time
	// pass lets d pass on the backend's clock and returns once it has.
	pass func(t *testing.T, d time.Duration)
}

// runControl is the one suite of Tickets and Revocations, run against every backend.
func runControl(t *testing.T, open func(t *testing.T) controlEnv) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e controlEnv)
	}{
		{"TicketTakenOnce", ticketTakenOnce},
		{"TicketValidates", ticketValidates},
		{"TicketIDInUse", ticketIDInUse},
		{"TicketExpires", ticketExpires},
		{"TicketConcurrentTakes", ticketConcurrentTakes},
		{"TicketPeekLeavesIt", ticketPeekLeavesIt},
		{"RevokeValidates", revokeValidates},
		{"RevokeReachesWatcher", revokeReachesWatcher},
		{"WatcherGetsTheSet", watcherGetsTheSet},
		{"ExpiredRevocationNotReported", expiredRevocationNotReported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// ticketID is a ticket id no other test uses.
func ticketID(t *testing.T, suffix string) string {
	return strings.NewReplacer(".", "_", "~", "_").Replace(redistest.Prefix(t)) + "_" + suffix
}

func ticketTakenOnce(t *testing.T, e controlEnv) {
	ctx := context.Background()
	id := ticketID(t, "once")
	want := []byte(`{"sub":"u1","rooms":["a"]}`)
	if err := e.a.PutTicket(ctx, id, want, time.Minute); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := e.b.TakeTicket(ctx, id)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("take: %q, %v; want %q", got, err, want)
	}
	for name, c := range map[string]control{"a": e.a, "b": e.b} {
		if got, err := c.TakeTicket(ctx, id); !errors.Is(err, replay.ErrTicketUnknown) {
			t.Errorf("second take from %s: %q, %v; want ErrTicketUnknown", name, got, err)
		}
	}
	if _, err := e.a.TakeTicket(ctx, ticketID(t, "never")); !errors.Is(err, replay.ErrTicketUnknown) {
		t.Errorf("take of a ticket never put: %v; want ErrTicketUnknown", err)
	}
	empty := ticketID(t, "empty")
	if err := e.a.PutTicket(ctx, empty, nil, time.Minute); err != nil {
		t.Fatalf("put an empty value: %v", err)
	}
	if got, err := e.b.TakeTicket(ctx, empty); err != nil || len(got) != 0 {
		t.Fatalf("take an empty value: %q, %v", got, err)
	}
}

func ticketValidates(t *testing.T, e controlEnv) {
	ctx := context.Background()
	ok := ticketID(t, "ok")
	cases := []struct {
		name  string
		id    string
		value []byte
		ttl   time.Duration
	}{
		{"EmptyID", "", nil, time.Minute},
		{"LongID", strings.Repeat("a", 129), nil, time.Minute},
		{"Brace", "a{b}", nil, time.Minute},
		{"Colon", "a:b", nil, time.Minute},
		{"Dot", "a.b", nil, time.Minute},
		{"NonASCII", "é", nil, time.Minute},
		{"LongValue", ok, make([]byte, 64<<10+1), time.Minute},
		{"ZeroTTL", ok, nil, 0},
		{"NegativeTTL", ok, nil, -time.Second},
		{"SubMillisecondTTL", ok, nil, time.Microsecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.a.PutTicket(ctx, tc.id, tc.value, tc.ttl); !errors.Is(err, replay.ErrInvalid) {
				t.Errorf("put: %v; want ErrInvalid", err)
			}
		})
	}
	if _, err := e.a.TakeTicket(ctx, "a{b}"); !errors.Is(err, replay.ErrInvalid) {
		t.Errorf("take of a malformed id: %v; want ErrInvalid", err)
	}
	long := ticketID(t, strings.Repeat("x", 10))
	if err := e.a.PutTicket(ctx, long, make([]byte, 64<<10), time.Minute); err != nil {
		t.Fatalf("put of a 64 KiB value: %v", err)
	}
	if got, err := e.b.TakeTicket(ctx, long); err != nil || len(got) != 64<<10 {
		t.Fatalf("take of a 64 KiB value: %d bytes, %v", len(got), err)
	}
}

func ticketIDInUse(t *testing.T, e controlEnv) {
	ctx := context.Background()
	id := ticketID(t, "dup")
	if err := e.a.PutTicket(ctx, id, []byte("first"), time.Minute); err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := e.b.PutTicket(ctx, id, []byte("second"), time.Minute); !errors.Is(err, replay.ErrInvalid) {
		t.Fatalf("second put of one id: %v; want ErrInvalid", err)
	}
	if got, err := e.a.TakeTicket(ctx, id); err != nil || string(got) != "first" {
		t.Fatalf("take: %q, %v; want the first value", got, err)
	}
}

func ticketExpires(t *testing.T, e controlEnv) {
	ctx := context.Background()
	short, long := ticketID(t, "short"), ticketID(t, "long")
	if err := e.a.PutTicket(ctx, short, []byte("s"), 50*time.Millisecond); err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := e.a.PutTicket(ctx, long, []byte("l"), time.Hour); err != nil {
		t.Fatalf("put: %v", err)
	}
	e.pass(t, 100*time.Millisecond)
	if got, err := e.b.TakeTicket(ctx, short); !errors.Is(err, replay.ErrTicketUnknown) {
		t.Fatalf("take after the ttl: %q, %v; want ErrTicketUnknown", got, err)
	}
	if got, err := e.b.TakeTicket(ctx, long); err != nil || string(got) != "l" {
		t.Fatalf("take of a ticket put beside it with a long ttl: %q, %v", got, err)
	}
}

func ticketConcurrentTakes(t *testing.T, e controlEnv) {
	ctx := context.Background()
	for i := range 200 {
		id := ticketID(t, "race")
		if err := e.a.PutTicket(ctx, id, []byte("v"), time.Minute); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, c := range []control{e.a, e.b} {
			wg.Go(func() {
				<-start
				_, errs[j] = c.TakeTicket(ctx, id)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, replay.ErrTicketUnknown):
				t.Fatalf("round %d: take: %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d takes won, want exactly 1 (%v)", i, won, errs)
		}
	}
}

// ticketPeekLeavesIt: a peek reads a ticket without spending it, from any handle;
// it knows no ticket that a take would not find.
func ticketPeekLeavesIt(t *testing.T, e controlEnv) {
	ctx := context.Background()
	id, short := ticketID(t, "peek"), ticketID(t, "peek_short")
	want := []byte(`{"sub":"u1","jti":"j1","exp":1796000000000}`)
	if err := e.a.PutTicket(ctx, id, want, time.Minute); err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := e.a.PutTicket(ctx, short, []byte("s"), 50*time.Millisecond); err != nil {
		t.Fatalf("put: %v", err)
	}
	for name, c := range map[string]control{"a": e.a, "b": e.b} {
		if got, err := c.PeekTicket(ctx, id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("peek from %s: %q, %v; want %q", name, got, err, want)
		}
	}
	if got, err := e.b.TakeTicket(ctx, id); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("take after the peeks: %q, %v; want %q", got, err, want)
	}
	if got, err := e.a.PeekTicket(ctx, id); !errors.Is(err, replay.ErrTicketUnknown) {
		t.Fatalf("peek after the take: %q, %v; want ErrTicketUnknown", got, err)
	}
	e.pass(t, 100*time.Millisecond)
	if got, err := e.b.PeekTicket(ctx, short); !errors.Is(err, replay.ErrTicketUnknown) {
		t.Fatalf("peek after the ttl: %q, %v; want ErrTicketUnknown", got, err)
	}
	if _, err := e.a.PeekTicket(ctx, "a{b}"); !errors.Is(err, replay.ErrInvalid) {
		t.Fatalf("peek of a malformed id: %v; want ErrInvalid", err)
	}
}

// revocation returns a revocation of a value no other test uses, in force for d.
func revocation(t *testing.T, e controlEnv, kind, suffix string, d time.Duration) replay.Revocation {
	now := e.now().Truncate(time.Millisecond)
	return replay.Revocation{Kind: kind, Value: redistest.Prefix(t) + "." + suffix, At: now, Until: now.Add(d)}
}

func revokeValidates(t *testing.T, e controlEnv) {
	ctx := context.Background()
	good := revocation(t, e, "sub", "good", time.Hour)
	cases := []struct {
		name string
		edit func(r *replay.Revocation)
	}{
		{"Kind", func(r *replay.Revocation) { r.Kind = "iss" }},
		{"EmptyKind", func(r *replay.Revocation) { r.Kind = "" }},
		{"EmptyValue", func(r *replay.Revocation) { r.Value = "" }},
		{"LongValue", func(r *replay.Revocation) { r.Value = strings.Repeat("v", 257) }},
		{"BadUTF8", func(r *replay.Revocation) { r.Value = "a\xffb" }},
		{"UntilAtAt", func(r *replay.Revocation) { r.Until = r.At }},
		{"UntilBeforeAt", func(r *replay.Revocation) { r.Until = r.At.Add(-time.Second) }},
		{"ZeroAt", func(r *replay.Revocation) { r.At = time.Time{} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.edit(&r)
			if err := e.a.Revoke(ctx, r); !errors.Is(err, replay.ErrInvalid) {
				t.Errorf("revoke %+v: %v; want ErrInvalid", r, err)
			}
		})
	}
	r := good
	r.Value = strings.Repeat("é", 128) // 256 bytes
	if err := e.a.Revoke(ctx, r); err != nil {
		t.Errorf("revoke of a 256-byte value: %v", err)
	}
}

// watch starts a watcher on c that sends what it reports to the returned channel; it
// stops when the test ends.
func watch(t *testing.T, c control) <-chan replay.Revocation {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan replay.Revocation, 1024)
	c.WatchRevocations(ctx, func(r replay.Revocation) {
		select {
		case ch <- r:
		default: // a test that lets 1024 pile up has failed already
		}
	})
	return ch
}

// await reads ch until want arrives and returns what came before it. It fails t
// after 20s.
func await(t *testing.T, ch <-chan replay.Revocation, want replay.Revocation) []replay.Revocation {
	t.Helper()
	var before []replay.Revocation
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-ch:
			if sameRevocation(r, want) {
				return before
			}
			before = append(before, r)
		case <-timeout:
			t.Fatalf("revocation %+v not reported within 20s (got %d others)", want, len(before))
			return nil
		}
	}
}

func sameRevocation(a, b replay.Revocation) bool {
	return a.Kind == b.Kind && a.Value == b.Value && a.At.Equal(b.At) && a.Until.Equal(b.Until)
}

func revokeReachesWatcher(t *testing.T, e controlEnv) {
	ch := watch(t, e.b)
	r := revocation(t, e, "jti", "live", time.Hour)
	if err := e.a.Revoke(context.Background(), r); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	await(t, ch, r)
}

func watcherGetsTheSet(t *testing.T, e controlEnv) {
	ctx := context.Background()
	r1 := revocation(t, e, "sub", "before1", time.Hour)
	r2 := revocation(t, e, "jti", "before2", 2*time.Hour)
	for _, r := range []replay.Revocation{r1, r2} {
		if err := e.a.Revoke(ctx, r); err != nil {
			t.Fatalf("revoke: %v", err)
		}
	}
	ch := watch(t, e.b)
	before := await(t, ch, r2)
	found := false
	for _, r := range before {
		found = found || sameRevocation(r, r1)
	}
	if !found {
		t.Fatalf("the earlier revocation %+v was not reported before %+v", r1, r2)
	}
}

func expiredRevocationNotReported(t *testing.T, e controlEnv) {
	ctx := context.Background()
	gone := revocation(t, e, "sub", "gone", 50*time.Millisecond)
	if err := e.a.Revoke(ctx, gone); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	e.pass(t, 100*time.Millisecond)
	// The marker outlives the expired one, so a set read in order of Until reports it
	// last: once it is here, the expired one would have been too.
	marker := revocation(t, e, "sub", "marker", time.Hour)
	if err := e.a.Revoke(ctx, marker); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	past := revocation(t, e, "jti", "past", time.Hour)
	past.At, past.Until = past.At.Add(-2*time.Hour), past.Until.Add(-2*time.Hour)
	if err := e.a.Revoke(ctx, past); err != nil {
		t.Fatalf("revoke of one that ended already: %v", err)
	}
	ch := watch(t, e.b)
	for _, r := range await(t, ch, marker) {
		if sameRevocation(r, gone) || sameRevocation(r, past) {
			t.Fatalf("an expired revocation was reported: %+v", r)
		}
	}
	// Live notices: an expired one revoked now is not reported either.
	live := watch(t, e.b)
	marker2 := revocation(t, e, "sub", "marker2", time.Hour)
	past2 := past
	past2.Value += "2"
	for _, r := range []replay.Revocation{past2, marker2} {
		if err := e.a.Revoke(ctx, r); err != nil {
			t.Fatalf("revoke: %v", err)
		}
	}
	for _, r := range await(t, live, marker2) {
		if sameRevocation(r, past2) || sameRevocation(r, gone) {
			t.Fatalf("an expired revocation was reported: %+v", r)
		}
	}
}

// controlOf is log's control plane; it fails t when log has none.
func controlOf(t testing.TB, log replay.Log) replay.Control {
	t.Helper()
	c, ok := replay.ControlOf(log)
	if !ok {
		t.Fatalf("%T has no control plane", log)
	}
	return c
}

// TestControlOf: a log's control plane is one set of stores, whichever call asks
// for it; a Log of another kind has none.
func TestControlOf(t *testing.T) {
	mem := newMemory(t, replay.MemoryConfig{})
	a, b := controlOf(t, mem), controlOf(t, mem)
	if a != b {
		t.Fatal("two calls of ControlOf for one log returned different stores")
	}
	if a.Tickets == nil || a.Revocations == nil || a.Occupancy == nil || a.Owners == nil || a.Notices == nil {
		t.Fatalf("a store is missing: %+v", a)
	}
	if _, ok := replay.ControlOf(struct{ replay.Log }{mem}); ok {
		t.Fatal("a Log of another kind has a control plane")
	}
	if c, ok := replay.ControlOf(wrappedLog{wrappedLog{mem}}); !ok || c != a {
		t.Fatalf("a Log that wraps the log: %v, %v; want the log's control plane", c, ok)
	}
	// What one store of the pod writes, the same store read again sees.
	ctx := context.Background()
	if err := a.Tickets.PutTicket(ctx, "shared", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := controlOf(t, mem).Tickets.TakeTicket(ctx, "shared"); err != nil || string(v) != "v" {
		t.Fatalf("take through another call: %q, %v", v, err)
	}
}

// wrappedLog wraps a Log and says so.
type wrappedLog struct{ replay.Log }

func (w wrappedLog) Unwrap() replay.Log { return w.Log }
