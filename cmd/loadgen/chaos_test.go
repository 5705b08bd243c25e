package main

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
)

func chaosSpec(seed uint64) scheduleSpec {
	return scheduleSpec{seed: seed, duration: 3 * time.Minute, gap: 15 * time.Second, pods: chaosPods, shards: chaosShards, rooms: 12}
}

func TestChaosScheduleDeterministic(t *testing.T) {
	a, b := newSchedule(chaosSpec(7)), newSchedule(chaosSpec(7))
	if len(a) < 5 || !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 drew two schedules (or too short a one):\n%+v\n%+v", a, b)
	}
	if c := newSchedule(chaosSpec(8)); reflect.DeepEqual(a, c) {
		t.Errorf("seeds 7 and 8 drew the same schedule: %+v", a)
	}
	for seed := range uint64(50) {
		s := newSchedule(chaosSpec(seed))
		dead := map[int]bool{} // shards whose primary was killed: no replica left
		kills := 0
		for i, f := range s {
			if i > 0 && f.At <= s[i-1].At {
				t.Fatalf("seed %d: fault %d at %s, not after %s", seed, i, f.At, s[i-1].At)
			}
			if f.At > 3*time.Minute {
				t.Errorf("seed %d: fault at %s, past -duration", seed, f.At)
			}
			switch f.Kind {
			case kindFailover, kindKillPrimary:
				if dead[f.Target] {
					t.Errorf("seed %d: %s of shard %d, whose replica is gone", seed, f.Kind, f.Target)
				}
				if f.Kind == kindKillPrimary {
					dead[f.Target] = true
					kills++
				}
			case kindMigrate:
				if f.Target < 0 || f.Target >= 12 || f.Shift < 1 || f.Shift >= chaosShards {
					t.Errorf("seed %d: migrate %+v out of range", seed, f)
				}
			default:
				if f.Target < 0 || f.Target >= chaosPods {
					t.Errorf("seed %d: %s of pod %d", seed, f.Kind, f.Target)
				}
			}
		}
		if kills > chaosShards {
			t.Errorf("seed %d: %d primaries killed", seed, kills)
		}
	}
}

func TestChaosScheduleKindsAndCount(t *testing.T) {
	spec := chaosSpec(1)
	spec.kinds, spec.count, spec.duration = []string{kindFailover, kindKillPod, kindShed}, 3, 40*time.Second
	s := newSchedule(spec)
	var kinds []string
	for _, f := range s {
		kinds = append(kinds, f.Kind)
	}
	slices.Sort(kinds)
	if want := []string{kindFailover, kindKillPod, kindShed}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want each of %v once (a shuffled bag)", kinds, want)
	}
	var out bytes.Buffer
	writeSchedule(&out, 1, s, func(i int) string { return "r" })
	if got := strings.Count(out.String(), "\n"); got != 4 {
		t.Errorf("schedule printout has %d lines, want a header and 3 faults:\n%s", got, out.String())
	}
}

func TestChaosBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "chaos", "-url", "http://127.0.0.1:1"}, // the scenario owns its fleet
		{"-scenario", "chaos", "-faults", "meteor"},
		{"-scenario", "chaos", "-fault-gap", "10ms"},
		{"-mux-streams", "2", "-mux-rooms", "3", "-rooms", "2"},
	} {
		if code := realMain(args, io.Discard, io.Discard); code != exitError {
			t.Errorf("realMain(%q) = %d, want %d", args, code, exitError)
		}
	}
}

// TestScenarioChaos runs a short chaos run on its own fleet: a failover, a pod
// killed and restarted, a primary's link blackholed, a shed, under load over every
// transport, with nothing lost.
func TestScenarioChaos(t *testing.T) {
	redistest.Require(t)
	bin := requireGatewayBin(t)
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"-scenario", "chaos", "-seed", "1", "-gateway", bin,
		"-duration", "40s", "-warmup", "1s", "-settle", "15s", "-fault-gap", "8s", "-fault-count", "4",
		"-faults", "failover,kill-pod,blackhole,shed", "-progress", "0", "-bar", "off", "-json"}, &stdout, &stderr)
	out := stdout.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rep Report
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("exit %d; no JSON report: %v\nstdout:\n%s\nstderr:\n%s", code, err, out, stderr.String())
	}
	if code != exitOK || rep.Lossy() || rep.Chaos == nil {
		t.Fatalf("exit %d, lossy %v:\n%s\nstderr:\n%s", code, rep.Lossy(), out, stderr.String())
	}
	if !strings.HasPrefix(out, "chaos schedule (seed 1): 4 faults") || !strings.Contains(out, "chaos timeline") ||
		!regexp.MustCompile(`(?m)^  verdict +PASS$`).MatchString(out) {
		t.Errorf("want the schedule first, then the timeline and a passing summary:\n%s", out)
	}
	var kinds []string
	for _, f := range rep.Chaos.Faults {
		kinds = append(kinds, f.Kind)
		if f.Error != "" || f.RecoverySeconds <= 0 {
			t.Errorf("fault %+v: want it recovered", f)
		}
	}
	slices.Sort(kinds)
	if want := []string{kindBlackhole, kindFailover, kindKillPod, kindShed}; !slices.Equal(kinds, want) {
		t.Errorf("faults %v, want %v", kinds, want)
	}
	if rep.Published == 0 || rep.Deliveries < rep.ExpectedDeliveries || rep.Reconnects == 0 || rep.Chaos.MaxWaitMs <= 0 {
		t.Errorf("published %d, deliveries %d of %d, reconnects %d, longest wait %.0fms: want events delivered through the faults",
			rep.Published, rep.Deliveries, rep.ExpectedDeliveries, rep.Reconnects, rep.Chaos.MaxWaitMs)
	}
	if rep.Transports["ws"] == nil || rep.Transports["ws"].Deliveries == 0 {
		t.Errorf("no WebSocket deliveries: %+v", rep.Transports)
	}
}
