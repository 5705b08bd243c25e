package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Target is what a drain closes: the pod's open streams.
type Target interface {
	// Len reports the open streams.
	Len() int
	// Shed closes up to n streams, each with a reconnect hint, and reports how many.
	Shed(n int) int
	// CloseAll closes every stream and waits for them to finish, or for ctx.
	CloseAll(ctx context.Context) error
}

// State is a pod's lifecycle state.
type State int32

const (
	// StateReady: serving and accepting.
	StateReady State = iota + 1
	// StateDraining: readiness is off; streams are being moved away.
	StateDraining
	// StateStopped: every stream is closed.
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateReady:
		return "ready"
	case StateDraining:
		return "draining"
	case StateStopped:
		return "stopped"
	}
	return "unknown"
}

// Config times a drain. Every zero value means "the default".
type Config struct {
	// Delay is how long the pod keeps accepting after Start (zero: none). The
	// gateway's default is 5s.
	Delay time.Duration
	// Window is the span over which open streams are closed (zero: all at once). The
	// gateway's default is 30s.
	Window time.Duration
	// Timeout is the hard deadline from Start; whatever is open then is force-closed
	// (default 45s). It must exceed Delay + Window.
	Timeout time.Duration
	// Tick is the interval between batches (default 100ms).
	Tick time.Duration
	// Logger receives progress (default slog.Default()).
	Logger *slog.Logger
}

// Drainer runs one drain of a Target.
type Drainer struct {
	target Target
	cfg    Config

	state     atomic.Int32
	accepting atomic.Bool
	closed    atomic.Int64
	startedAt atomic.Int64 // unix nanoseconds

	startOnce sync.Once
	forceOnce sync.Once
	force     chan struct{}
	done      chan struct{}
}

// New returns a Drainer in StateReady.
func New(target Target, cfg Config) (*Drainer, error) {
	if target == nil {
		return nil, errors.New("drain: target is required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 45 * time.Second
	}
	if cfg.Tick == 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Delay < 0 || cfg.Window < 0 || cfg.Tick < 0 {
		return nil, fmt.Errorf("drain: delay %s, window %s and tick %s must not be negative", cfg.Delay, cfg.Window, cfg.Tick)
	}
	if cfg.Timeout <= cfg.Delay+cfg.Window {
		return nil, fmt.Errorf("drain: timeout %s must exceed delay %s + window %s", cfg.Timeout, cfg.Delay, cfg.Window)
	}
	d := &Drainer{target: target, cfg: cfg, force: make(chan struct{}), done: make(chan struct{})}
	d.state.Store(int32(StateReady))
	d.accepting.Store(true)
	return d, nil
}

// State reports the lifecycle state.
func (d *Drainer) State() State { return State(d.state.Load()) }

// Ready reports whether readiness probes should pass.
func (d *Drainer) Ready() bool { return d.State() == StateReady }

// Accepting reports whether new streams may be admitted.
func (d *Drainer) Accepting() bool { return d.accepting.Load() }

// Closed reports how many streams the drain has closed so far.
func (d *Drainer) Closed() int64 { return d.closed.Load() }

// Done is closed when the drain has finished.
func (d *Drainer) Done() <-chan struct{} { return d.done }

// Start begins the drain; it reports false if one had already begun.
func (d *Drainer) Start() bool {
	started := false
	d.startOnce.Do(func() {
		started = true
		d.startedAt.Store(time.Now().UnixNano())
		d.state.Store(int32(StateDraining))
		go d.run()
	})
	return started
}

// Force ends the drain at once: every open stream is closed now. It starts the drain
// if needed.
func (d *Drainer) Force() {
	d.forceOnce.Do(func() { close(d.force) })
	d.Start()
}

func (d *Drainer) run() {
	defer close(d.done)
	log := d.cfg.Logger
	deadline := time.Unix(0, d.startedAt.Load()).Add(d.cfg.Timeout)
	log.Info("drain started", "streams", d.target.Len(), "delay", d.cfg.Delay.String(), "window", d.cfg.Window.String(), "timeout", d.cfg.Timeout.String())

	if d.wait(d.cfg.Delay) {
		d.accepting.Store(false)
		log.Info("drain: no longer accepting streams", "streams", d.target.Len())
		d.spread()
	}
	d.accepting.Store(false)

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	left := d.target.Len()
	if err := d.target.CloseAll(ctx); err != nil {
		log.Warn("drain: deadline passed with streams open", "err", err)
	}
	d.closed.Add(int64(left))
	d.state.Store(int32(StateStopped))
	log.Info("drain finished", "closed", d.closed.Load(),
		"seconds", time.Since(time.Unix(0, d.startedAt.Load())).Seconds())
}

// spread closes the open streams in batches, one every Tick (jittered), sized so the
// rest is spread evenly over what remains of the window.
func (d *Drainer) spread() {
	end := time.Now().Add(d.cfg.Window)
	for {
		open := d.target.Len()
		if open == 0 {
			return
		}
		remaining := time.Until(end)
		if remaining <= 0 {
			return
		}
		n := Quota(open, remaining, d.cfg.Tick)
		d.closed.Add(int64(d.target.Shed(n)))
		// Jitter each pause by ±25% so batches from many pods do not line up.
		pause := d.cfg.Tick*3/4 + rand.N(d.cfg.Tick/2+1)
		if !d.wait(min(pause, remaining)) {
			return
		}
	}
}

// Quota is how many of open streams to close now so that the rest is spread evenly
// over remaining, one batch per tick: ceil(open / ticks left), at least 1.
func Quota(open int, remaining, tick time.Duration) int {
	if open <= 0 {
		return 0
	}
	ticks := int(remaining / max(tick, 1))
	if ticks <= 1 {
		return open
	}
	return (open + ticks - 1) / ticks
}

// wait sleeps for dur unless forced; it reports false when forced.
func (d *Drainer) wait(dur time.Duration) bool {
	if dur <= 0 {
		select {
		case <-d.force:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.force:
		return false
	}
}

// Progress is a snapshot for stats and logs.
type Progress struct {
	State   State
	Open    int
	Closed  int64
	Elapsed time.Duration // since Start; 0 while ready
}

// Progress returns the drain's progress.
func (d *Drainer) Progress() Progress {
	p := Progress{State: d.State(), Open: d.target.Len(), Closed: d.closed.Load()}
	if at := d.startedAt.Load(); at != 0 {
		p.Elapsed = time.Since(time.Unix(0, at))
	}
	return p
}
