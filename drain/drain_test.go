package drain

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

const waitLimit = 5 * time.Second

// shedCall is one call the drain made on the target.
type shedCall struct {
	at        time.Duration // since the target was built
	asked     int           // n passed to Shed; -1 for CloseAll
	closed    int
	accepting bool // the drainer's Accepting() at the time of the call
}

// fakeTarget counts open streams. Shed and CloseAll close them at once, unless the
// target is stuck: then nothing closes and CloseAll waits for its ctx.
type fakeTarget struct {
	start time.Time
	stuck bool
	d     *Drainer // set after New, to record Accepting() during calls

	mu          sync.Mutex
	open        int
	calls       []shedCall
	closeAllErr error

	shed     chan struct{} // signalled after each Shed that closed something
	closeAll chan struct{} // signalled when CloseAll is called
}

var _ Target = (*fakeTarget)(nil)

func newFakeTarget(open int, stuck bool) *fakeTarget {
	return &fakeTarget{
		start:    time.Now(),
		stuck:    stuck,
		open:     open,
		shed:     make(chan struct{}, 1),
		closeAll: make(chan struct{}, 1),
	}
}

func (f *fakeTarget) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

func (f *fakeTarget) record(asked, closed int) {
	accepting := f.d != nil && f.d.Accepting()
	f.calls = append(f.calls, shedCall{at: time.Since(f.start), asked: asked, closed: closed, accepting: accepting})
}

func (f *fakeTarget) Shed(n int) int {
	f.mu.Lock()
	k := 0
	if !f.stuck {
		k = min(n, f.open)
	}
	f.open -= k
	f.record(n, k)
	f.mu.Unlock()
	if k > 0 {
		select {
		case f.shed <- struct{}{}:
		default:
		}
	}
	return k
}

func (f *fakeTarget) CloseAll(ctx context.Context) error {
	f.mu.Lock()
	k := 0
	if !f.stuck {
		k = f.open
	}
	f.open -= k
	f.record(-1, k)
	f.mu.Unlock()
	select {
	case f.closeAll <- struct{}{}:
	default:
	}
	var err error
	if f.stuck {
		<-ctx.Done()
		err = ctx.Err()
	}
	f.mu.Lock()
	f.closeAllErr = err
	f.mu.Unlock()
	return err
}

func (f *fakeTarget) snapshot() ([]shedCall, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]shedCall(nil), f.calls...), f.open, f.closeAllErr
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newDrainer(t *testing.T, target *fakeTarget, cfg Config) *Drainer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	d, err := New(target, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	target.d = d
	// Whatever a test starts ends before the next one (TestMain checks for leaks).
	t.Cleanup(func() {
		d.Force()
		awaitDone(t, d)
	})
	return d
}

func awaitDone(t *testing.T, d *Drainer) time.Duration {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case <-d.Done():
		return time.Since(start)
	case <-timer.C:
		t.Fatalf("drain not done within %s (state %s)", waitLimit, d.State())
		return 0
	}
}

func TestQuota(t *testing.T) {
	tests := []struct {
		name      string
		open      int
		remaining time.Duration
		tick      time.Duration
		want      int
	}{
		{name: "nothing open", open: 0, remaining: time.Second, tick: 100 * time.Millisecond, want: 0},
		{name: "negative open", open: -3, remaining: time.Second, tick: 100 * time.Millisecond, want: 0},
		{name: "one open, many ticks", open: 1, remaining: time.Second, tick: 100 * time.Millisecond, want: 1},
		{name: "remaining less than a tick", open: 37, remaining: 50 * time.Millisecond, tick: 100 * time.Millisecond, want: 37},
		{name: "remaining exactly one tick", open: 37, remaining: 100 * time.Millisecond, tick: 100 * time.Millisecond, want: 37},
		{name: "nothing remaining", open: 37, remaining: 0, tick: 100 * time.Millisecond, want: 37},
		{name: "exact division", open: 100, remaining: time.Second, tick: 100 * time.Millisecond, want: 10},
		{name: "ceil", open: 101, remaining: time.Second, tick: 100 * time.Millisecond, want: 11},
		{name: "ceil of a partial tick count", open: 100, remaining: 1050 * time.Millisecond, tick: 100 * time.Millisecond, want: 10},
		{name: "fewer open than ticks", open: 3, remaining: time.Second, tick: 10 * time.Millisecond, want: 1},
		{name: "two ticks", open: 5, remaining: 200 * time.Millisecond, tick: 100 * time.Millisecond, want: 3},
		{name: "defaults: 30s window, 100ms tick", open: 10000, remaining: 30 * time.Second, tick: 100 * time.Millisecond, want: 34},
		{name: "zero tick", open: 10, remaining: time.Second, tick: 0, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quota(tt.open, tt.remaining, tt.tick); got != tt.want {
				t.Fatalf("Quota(%d, %s, %s) = %d, want %d", tt.open, tt.remaining, tt.tick, got, tt.want)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	target := newFakeTarget(0, false)
	tests := []struct {
		name    string
		target  Target
		cfg     Config
		wantErr bool
	}{
		{name: "defaults", target: target, cfg: Config{}},
		{name: "gateway defaults", target: target, cfg: Config{Delay: 5 * time.Second, Window: 30 * time.Second, Timeout: 45 * time.Second}},
		{name: "nil target", cfg: Config{}, wantErr: true},
		{name: "timeout equals delay plus window", target: target, cfg: Config{Delay: time.Second, Window: 2 * time.Second, Timeout: 3 * time.Second}, wantErr: true},
		{name: "timeout below delay plus window", target: target, cfg: Config{Delay: time.Second, Window: 2 * time.Second, Timeout: 2 * time.Second}, wantErr: true},
		{name: "delay plus window above the default timeout", target: target, cfg: Config{Delay: 20 * time.Second, Window: 30 * time.Second}, wantErr: true},
		{name: "negative delay", target: target, cfg: Config{Delay: -time.Second}, wantErr: true},
		{name: "negative window", target: target, cfg: Config{Window: -time.Second}, wantErr: true},
		{name: "negative tick", target: target, cfg: Config{Tick: -time.Millisecond}, wantErr: true},
		{name: "negative timeout", target: target, cfg: Config{Timeout: -time.Second}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = quietLogger()
			d, err := New(tt.target, tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New: err %v, want error %v", err, tt.wantErr)
			}
			if err == nil && d.State() != StateReady {
				t.Fatalf("State = %s, want %s", d.State(), StateReady)
			}
		})
	}
}

func TestStateString(t *testing.T) {
	tests := []struct {
		s    State
		want string
	}{
		{StateReady, "ready"},
		{StateDraining, "draining"},
		{StateStopped, "stopped"},
		{0, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Fatalf("State(%d).String() = %q, want %q", tt.s, got, tt.want)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	const delay = 200 * time.Millisecond
	target := newFakeTarget(10, false)
	d := newDrainer(t, target, Config{Delay: delay, Window: 50 * time.Millisecond, Tick: 10 * time.Millisecond, Timeout: time.Second})

	if d.State() != StateReady || !d.Ready() || !d.Accepting() {
		t.Fatalf("new drainer: state %s ready %v accepting %v, want ready and accepting", d.State(), d.Ready(), d.Accepting())
	}
	if p := d.Progress(); p != (Progress{State: StateReady, Open: 10}) {
		t.Fatalf("Progress = %+v before Start", p)
	}
	select {
	case <-d.Done():
		t.Fatal("Done closed before Start")
	default:
	}

	started := time.Since(target.start)
	if !d.Start() {
		t.Fatal("first Start reported false")
	}
	// Checked well inside the delay: readiness is off, admission still on.
	if d.State() != StateDraining || d.Ready() || !d.Accepting() {
		t.Fatalf("during the delay: state %s ready %v accepting %v, want draining, not ready, accepting",
			d.State(), d.Ready(), d.Accepting())
	}
	if d.Start() {
		t.Fatal("second Start reported true")
	}

	awaitDone(t, d)
	if d.State() != StateStopped || d.Ready() || d.Accepting() {
		t.Fatalf("after the drain: state %s ready %v accepting %v, want stopped, not ready, not accepting",
			d.State(), d.Ready(), d.Accepting())
	}
	calls, open, err := target.snapshot()
	if open != 0 || err != nil || d.Closed() != 10 {
		t.Fatalf("open %d, CloseAll err %v, Closed() %d; want all 10 closed", open, err, d.Closed())
	}
	if len(calls) == 0 {
		t.Fatal("the target was never asked to close anything")
	}
	for _, c := range calls {
		if c.accepting {
			t.Fatalf("a close at %s happened while still accepting", c.at)
		}
		if c.at-started < delay {
			t.Fatalf("a close %s after Start happened inside the %s delay", c.at-started, delay)
		}
	}
	if p := d.Progress(); p.State != StateStopped || p.Open != 0 || p.Closed != 10 || p.Elapsed < delay {
		t.Fatalf("Progress = %+v after the drain", p)
	}
	if d.Start() {
		t.Fatal("Start after the drain reported true")
	}
}

func TestBatchSchedule(t *testing.T) {
	const (
		streams = 1000
		window  = 500 * time.Millisecond
		tick    = 10 * time.Millisecond
		slack   = time.Second
	)
	fair := (streams + int(window/tick) - 1) / int(window/tick) // 20 per tick
	target := newFakeTarget(streams, false)
	d := newDrainer(t, target, Config{Window: window, Tick: tick, Timeout: 5 * time.Second})
	started := time.Since(target.start)
	d.Start()
	awaitDone(t, d)

	calls, open, err := target.snapshot()
	if open != 0 || err != nil || d.Closed() != streams {
		t.Fatalf("open %d, CloseAll err %v, Closed() %d; want all %d closed", open, err, d.Closed(), streams)
	}
	var first, last time.Duration = -1, 0
	prev, batches := started, 0
	for _, c := range calls {
		// A pause is at most 1.25 ticks. After a longer gap the drain's goroutine did
		// not run on time (a busy machine) and rightly catches up with a larger batch
		// to keep to the window: that batch is not held to the fair share.
		stalled := c.at-prev > 3*tick
		prev = c.at
		if c.closed == 0 {
			continue
		}
		batches++
		if first < 0 {
			first = c.at
		}
		last = c.at
		if c.closed > 3*fair && !stalled {
			t.Errorf("a batch at %s closed %d streams, more than 3x the fair share of %d", c.at-started, c.closed, fair)
		}
	}
	if last-started > window+slack {
		t.Errorf("the last stream closed %s after Start, want within the %s window (+%s)", last-started, window, slack)
	}
	if last-first < window/2 {
		t.Errorf("closes spread over %s, want at least half the %s window", last-first, window)
	}
	if batches < 10 {
		t.Errorf("%d batches, want the closes spread over many ticks", batches)
	}
	if t.Failed() {
		for _, c := range calls {
			t.Logf("%8s asked %4d closed %4d", (c.at - started).Round(time.Millisecond), c.asked, c.closed)
		}
	}
}

func TestForce(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		// forceAfterFirstShed forces once the spread has begun; otherwise Force is
		// called inside the delay (or before Start, when noStart is set).
		forceAfterFirstShed bool
		noStart             bool
	}{
		{name: "during the delay", cfg: Config{Delay: 10 * time.Second, Window: 10 * time.Second, Timeout: 30 * time.Second}},
		{name: "before Start", cfg: Config{Delay: 10 * time.Second, Window: 10 * time.Second, Timeout: 30 * time.Second}, noStart: true},
		{name: "during the window", cfg: Config{Window: 10 * time.Second, Tick: 10 * time.Millisecond, Timeout: 30 * time.Second}, forceAfterFirstShed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const streams = 100
			target := newFakeTarget(streams, false)
			d := newDrainer(t, target, tt.cfg)
			if !tt.noStart {
				d.Start()
			}
			if tt.forceAfterFirstShed {
				timer := time.NewTimer(waitLimit)
				defer timer.Stop()
				select {
				case <-target.shed:
				case <-timer.C:
					t.Fatal("no batch closed")
				}
			}
			d.Force()
			if took := awaitDone(t, d); took > time.Second {
				t.Fatalf("forced drain took %s", took)
			}
			calls, open, err := target.snapshot()
			if open != 0 || err != nil || d.Closed() != streams || d.State() != StateStopped || d.Accepting() {
				t.Fatalf("open %d, CloseAll err %v, Closed() %d, state %s, accepting %v; want all closed and stopped",
					open, err, d.Closed(), d.State(), d.Accepting())
			}
			if last := calls[len(calls)-1]; last.asked != -1 {
				t.Fatalf("last call %+v, want the final CloseAll", last)
			}
			if !tt.forceAfterFirstShed && len(calls) != 1 {
				t.Fatalf("calls %+v, want CloseAll alone", calls)
			}
			d.Force() // idempotent
		})
	}
}

func TestTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	target := newFakeTarget(10, true)
	d := newDrainer(t, target, Config{Window: 30 * time.Millisecond, Tick: 10 * time.Millisecond, Timeout: timeout})
	start := time.Now()
	d.Start()
	awaitDone(t, d)
	if took := time.Since(start); took < timeout {
		t.Fatalf("drain ended after %s, before the %s deadline", took, timeout)
	}
	if d.State() != StateStopped || d.Accepting() {
		t.Fatalf("state %s accepting %v, want stopped and not accepting", d.State(), d.Accepting())
	}
	_, open, err := target.snapshot()
	if open != 10 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open %d, CloseAll err %v; want the 10 stuck streams and a deadline error", open, err)
	}
}
