package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The chaos scenario (-scenario chaos -seed N -duration D) owns its fleet
// (chaos_fleet.go): a 3+3 Redis Cluster and three gateway pods on loopback. The
// ordinary load runs against it (SSE, multiplexed SSE and WebSocket members, every
// one checked by its Tracker), and in the measured window the faults of the seeded
// schedule (chaos_schedule.go, chaos_faults.go) are injected one at a time: each
// waits for its nominal time and for the fleet to have recovered from the one
// before (bounded by -recovery-bound). It prints the schedule first, a line per
// fault as it goes, then the report, the timeline and the summary, and exits 1 on
// any lost, repeated or out-of-order event or silent gap.

// chaosRun is one chaos run's fleet and schedule.
type chaosRun struct {
	fl       *fleet
	schedule []Fault
	log      io.Writer
}

// ChaosResult is the chaos scenario's outcome.
type ChaosResult struct {
	Seed     uint64        `json:"seed"`
	Schedule []Fault       `json:"schedule"`
	Faults   []FaultRecord `json:"faults"`
	// MaxWaitMs is the longest any member waited for an event that existed: from
	// the publish the server accepted (the envelope's ts) to its delivery.
	MaxWaitMs float64 `json:"max_wait_ms"`
	// Symptoms describe the first anomaly of each lossy member (bounded).
	Symptoms []string `json:"symptoms,omitempty"`
	// Incidents are pods that exited when no fault asked them to.
	Incidents []string `json:"incidents,omitempty"`
}

// FaultRecord is one injected fault in the timeline.
type FaultRecord struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// AtSeconds is when it was injected, into the measured window.
	AtSeconds float64 `json:"at_seconds"`
	// RepairSeconds runs until the fault's own repair was done (the pod back, the
	// failover over); RecoverySeconds until every stream was open again and every
	// member had every event acknowledged by then.
	RepairSeconds   float64 `json:"repair_seconds"`
	RecoverySeconds float64 `json:"recovery_seconds"`
	Detail          string  `json:"detail,omitempty"`
	Error           string  `json:"error,omitempty"`
}

// recoveryPoll is how often the recovery wait looks at the members.
const recoveryPoll = 50 * time.Millisecond

// startChaos prints the schedule, starts the fleet and points cfg at it. The
// caller stops the fleet.
func startChaos(cfg *Config, stdout, stderr io.Writer) (*fleet, error) {
	schedule := newSchedule(scheduleSpec{
		seed: cfg.Seed, duration: cfg.Duration, gap: cfg.FaultGap, count: cfg.FaultCount,
		kinds: cfg.Faults, pods: chaosPods, shards: chaosShards, rooms: cfg.Rooms,
	})
	writeSchedule(stdout, cfg.Seed, schedule, cfg.roomName)
	fl, err := startFleet(cfg.Gateway, stderr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "chaos: fleet up: %s\n", fl.pids())
	cfg.URLs, cfg.AdminURLs = nil, nil
	for _, p := range fl.pods {
		cfg.URLs = append(cfg.URLs, p.public)
		cfg.AdminURLs = append(cfg.AdminURLs, p.admin)
	}
	cfg.URL = cfg.URLs[0]
	cfg.chaos = &chaosRun{fl: fl, schedule: schedule, log: stderr}
	return fl, nil
}

// runChaos injects the schedule's faults into the measured window that began at
// start, one at a time, each after the previous one's recovery.
func runChaos(ctx context.Context, ls *loadState, subs []*subscriber, rooms []*room, admin *http.Client, start time.Time) *ChaosResult {
	cr := ls.cfg.chaos
	env := &chaosEnv{fl: cr.fl, pods: ls.pods, admin: admin, rooms: ls.cfg.roomName}
	res := &ChaosResult{Seed: ls.cfg.Seed, Schedule: cr.schedule, Faults: []FaultRecord{}}
	cr.fl.setOut(func(pod int) { ls.pods.out[pod].Store(true) })
	kinds := map[string]faultKind{}
	for _, k := range faultKinds {
		kinds[k.name()] = k
	}
	for i, f := range cr.schedule {
		if !waitFor(ctx, nil, time.Until(start.Add(f.At))) {
			break
		}
		t0 := time.Now()
		rec := FaultRecord{Kind: f.Kind, Target: f.describe(ls.cfg.roomName), AtSeconds: t0.Sub(start).Seconds()}
		detail, err := kinds[f.Kind].inject(ctx, env, f)
		rec.Detail = detail
		rec.RepairSeconds = time.Since(t0).Seconds()
		if err == nil {
			err = waitRecovered(ctx, ls, subs, rooms, t0.Add(ls.cfg.RecoveryBound))
		}
		rec.RecoverySeconds = time.Since(t0).Seconds()
		if err != nil {
			rec.Error = err.Error()
		}
		fmt.Fprintf(cr.log, "chaos: %2d +%.1fs %s %s: %s; recovered in %.1fs%s\n",
			i+1, rec.AtSeconds, rec.Kind, rec.Target, rec.Detail, rec.RecoverySeconds, errorSuffix(rec.Error))
		res.Faults = append(res.Faults, rec)
		if ctx.Err() != nil {
			break
		}
	}
	return res
}

// waitRecovered waits until every member's stream is open and every member has
// every event its room had acknowledged when the wait began, or deadline.
func waitRecovered(ctx context.Context, ls *loadState, subs []*subscriber, rooms []*room, deadline time.Time) error {
	targets := make(map[*room]uint64, len(rooms))
	for _, r := range rooms {
		targets[r] = r.target.Load()
	}
	tick := time.NewTicker(recoveryPoll)
	defer tick.Stop()
	for {
		behind, closed := 0, 0
		for _, s := range subs {
			if s.lastSeq.Load() < targets[s.room] {
				behind++
			}
		}
		ls.connMu.Lock()
		for _, s := range subs {
			if !s.open {
				closed++
			}
		}
		ls.connMu.Unlock()
		if behind == 0 && closed == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not recovered within -recovery-bound: %d members behind, %d streams closed", behind, closed)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// fillChaos adds what the members saw to the chaos result: the longest wait, and
// the first anomaly of each lossy member with the fault just before it.
func (c *ChaosResult) fill(subs []*subscriber, start time.Time) {
	var maxWait int64
	for _, s := range subs {
		maxWait = max(maxWait, s.maxWait.Load())
		if len(c.Symptoms) >= maxLossyListed {
			continue
		}
		t := &s.track
		missing := s.undelivered()
		if !t.Lossy() && s.malformed == 0 && missing == 0 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "room %s, member %d over %s:", s.room.name, s.id, transportName(s))
		if a := s.firstBad; a.verdict != 0 {
			at := a.at.Sub(start).Seconds()
			fmt.Fprintf(&b, " first %s at seq %d, +%.1fs", a.verdict, a.seq, at)
			if f := c.faultBefore(at); f != nil {
				fmt.Fprintf(&b, ", after %s %s at +%.1fs", f.Kind, f.Target, f.AtSeconds)
			} else {
				b.WriteString(", before any fault")
			}
		}
		for i, m := range t.Missing() {
			if i == 3 {
				b.WriteString(" …")
				break
			}
			fmt.Fprintf(&b, "; missing %d-%d", m.Lo, m.Hi)
		}
		if missing > 0 {
			fmt.Fprintf(&b, "; %d acknowledged never arrived (last seq %d)", missing, s.lastSeq.Load())
		}
		c.Symptoms = append(c.Symptoms, b.String())
	}
	c.MaxWaitMs = millis(time.Duration(maxWait))
}

// faultBefore returns the last fault injected at or before at (seconds into the
// window).
func (c *ChaosResult) faultBefore(at float64) *FaultRecord {
	var last *FaultRecord
	for i := range c.Faults {
		if c.Faults[i].AtSeconds <= at {
			last = &c.Faults[i]
		}
	}
	return last
}

// transportName names a member's transport: sse, mux (a multiplexed stream) or ws.
func transportName(s *subscriber) string {
	if s.mux != nil {
		return "mux"
	}
	return transportOf(s)
}

// write prints the timeline and the summary.
func (c *ChaosResult) write(out io.Writer, r *Report, cfg *Config) {
	if c == nil {
		return
	}
	fmt.Fprintf(out, "\nchaos timeline (seed %d)\n", c.Seed)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  time\tfault\ttarget\trepair\trecovery\tdetail")
	byKind := map[string]int{}
	for _, f := range c.Faults {
		byKind[f.Kind]++
		fmt.Fprintf(tw, "  +%.1fs\t%s\t%s\t%.1fs\t%.1fs\t%s%s\n", f.AtSeconds, f.Kind, f.Target, f.RepairSeconds, f.RecoverySeconds, f.Detail, errorSuffix(f.Error))
	}
	_ = tw.Flush()
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	fmt.Fprintf(out, "\nchaos summary (seed %d, %d of %d faults injected)\n", c.Seed, len(c.Faults), len(c.Schedule))
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k, format string, v ...any) { fmt.Fprintf(tw, "  %s\t"+format+"\n", append([]any{k}, v...)...) }
	row("faults", "%s", strings.Join(kinds, ", "))
	row("published", "%d (errors %d%s)", r.Published, r.PublishErrors, formatErrors(r.PublishErrorsBy))
	row("delivered", "%d (expected %d)", r.Deliveries, r.ExpectedDeliveries)
	row("lost", "%d (silent gaps %d, never arrived %d)", r.Lost, r.Gaps, r.Undelivered)
	row("duplicates", "%d", r.Duplicates)
	row("out of order", "%d (and %d unannounced epoch changes, %d malformed)", r.Late, r.EpochChanges, r.Malformed)
	row("silent gaps", "%d seqs (a gap no resync announced)", r.Gaps)
	row("resyncs", "%d", r.Resyncs)
	row("longest wait", "%.0f ms (publish accepted → delivered, max over members)", c.MaxWaitMs)
	for _, s := range c.Symptoms {
		row("symptom", "%s", s)
	}
	for _, s := range c.Incidents {
		row("incident", "%s", s)
	}
	verdict := "PASS"
	if r.Lossy() {
		verdict = fmt.Sprintf("FAIL: rerun with -scenario chaos -seed %d -duration %s", c.Seed, cfg.Duration)
	}
	row("verdict", "%s", verdict)
	_ = tw.Flush()
}
