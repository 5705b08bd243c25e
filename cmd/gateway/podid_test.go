package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// A gateway run by these tests takes the times of its pod id's record from
// ROOMCAST_TEST_POD_ID_TIMES ("<ttl>,<every>"), so that a lapse takes seconds.
func init() {
	v := os.Getenv("ROOMCAST_TEST_POD_ID_TIMES")
	if v == "" {
		return
	}
	ttl, every, _ := strings.Cut(v, ",")
	a, err1 := time.ParseDuration(ttl)
	b, err2 := time.ParseDuration(every)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, "ROOMCAST_TEST_POD_ID_TIMES:", err)
		os.Exit(1)
	}
	podIDTimes.ttl, podIDTimes.every = a, b
}

// The record times of the process-level tests: a lapse in 3s, refreshes 10 times
// as often.
const testPodTTL, testPodEvery = 3 * time.Second, 300 * time.Millisecond

func shortPodTimes(t *testing.T) {
	t.Setenv("ROOMCAST_TEST_POD_ID_TIMES", testPodTTL.String()+","+testPodEvery.String())
}

// podRecordKey is the Redis key of a pod id's liveness record.
func podRecordKey(id string) string { return "room:pod:{" + id + "}:live" }

// fleetPod starts a gateway of the fleet on addrs with pod id id; its admin
// listener is on a port chosen here, so that its record names it.
func fleetPod(t *testing.T, addrs []string, id string) *gatewaytest.Process {
	t.Helper()
	admin := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	return startGatewayWith(t, gatewaytest.Options{Name: id, Args: []string{
		"--redis", strings.Join(addrs, ","), "--pod-id", id, "--admin-addr", admin,
		"--drain-delay", "0", "--drain-window", "0",
	}})
}

// TestPodIDTakenRefuses: a second gateway with a live pod's id exits 2 with a
// message that names the id and the live pod (pid, admin address) and says what to
// do, and leaves the live pod's record alone; a gateway with another id starts
// beside them; the live pod's record is refreshed across several TTLs, and once it
// stops cleanly its id is free at once: the next start claims it without waiting.
func TestPodIDTakenRefuses(t *testing.T) {
	shortPodTimes(t)
	s := redistest.SharedStandalone(t)
	id := redistest.Prefix(t)
	a := fleetPod(t, s.Addrs(), id)
	key := podRecordKey(id)
	if got := s.MustDo(t, "HGET", key, "pid"); got != strconv.Itoa(a.Pid()) {
		t.Fatalf("HGET %s pid = %q, want the live pod's %d", key, got, a.Pid())
	}
	instance := s.MustDo(t, "HGET", key, "instance")

	start := time.Now()
	code, stderr := runGateway(t, "--redis", s.Addr, "--pod-id", id, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	took := time.Since(start)
	if code != 2 {
		t.Fatalf("a second gateway with pod id %s exited %d, want 2:\n%s", id, code, stderr)
	}
	for _, want := range []string{
		"pod id ", id, " is already in use by a live pod (",
		"pid " + strconv.Itoa(a.Pid()), "admin " + a.AdminAddr(),
		"give each pod its own --pod-id",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "stopped refreshing") {
		t.Errorf("the refusal took the live pod for a stopped one:\n%s", stderr)
	}
	t.Logf("refused after %s (the live pod refreshes every %s)", took.Round(time.Millisecond), testPodEvery)
	if got := s.MustDo(t, "HGET", key, "instance"); got != instance {
		t.Fatalf("the refused start changed the record's instance: %q, want %q", got, instance)
	}

	// Another id starts beside it.
	fleetPod(t, s.Addrs(), id+"-b")

	// The live pod keeps its record across several TTLs: every refresh moves
	// "refreshed" on and the TTL back up.
	refreshed := s.MustDo(t, "HGET", key, "refreshed")
	until := time.Now().Add(3 * testPodTTL)
	replaytest.Eventually(t, 3*testPodTTL+10*time.Second, "three TTLs to pass with the record alive", func() error {
		if got := s.MustDo(t, "HGET", key, "instance"); got != instance {
			t.Fatalf("the live pod's record is gone or taken (instance %q)", got)
		}
		if time.Now().Before(until) {
			return errors.New("not yet")
		}
		return nil
	})
	if got := s.MustDo(t, "HGET", key, "refreshed"); got == refreshed {
		t.Fatalf("refreshed still %s after three TTLs", got)
	}
	if ms, err := strconv.Atoi(s.MustDo(t, "PTTL", key)); err != nil || ms <= 0 || ms > int(testPodTTL/time.Millisecond) {
		t.Fatalf("PTTL %s = %d, %v; want within %s", key, ms, err, testPodTTL)
	}
	if code, stderr := runGateway(t, "--redis", s.Addr, "--pod-id", id, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"); code != 2 {
		t.Fatalf("a second gateway after three TTLs exited %d, want 2:\n%s", code, stderr)
	}

	// A clean stop releases the record: the id is free at once.
	if err := a.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := s.MustDo(t, "EXISTS", key); n != "0" {
		t.Fatalf("EXISTS %s after a clean stop = %s, want 0", key, n)
	}
	b := startGatewayWith(t, gatewaytest.Options{Name: id + "-again", Args: []string{"--redis", s.Addr, "--pod-id", id, "--drain-delay", "0", "--drain-window", "0"}})
	if got := s.MustDo(t, "HGET", key, "pid"); got != strconv.Itoa(b.Pid()) {
		t.Fatalf("HGET %s pid = %q after the restart, want %d", key, got, b.Pid())
	}
	if strings.Contains(b.Log(), "pod id held by a process that stopped refreshing") {
		t.Fatalf("the start after a clean stop waited for the record:\n%s", b.Log())
	}
}

// TestPodIDFreeAfterKill: a pod killed with SIGKILL leaves its record behind; a
// start with its id waits for that record, which nobody refreshes any more, to
// lapse, and claims the id: not before the TTL less one refresh interval after the
// kill, and within the TTL (plus the time to start).
func TestPodIDFreeAfterKill(t *testing.T) {
	shortPodTimes(t)
	s := redistest.SharedStandalone(t)
	id := redistest.Prefix(t)
	a := fleetPod(t, s.Addrs(), id)
	a.Kill()
	killed := time.Now()
	key := podRecordKey(id)
	if got := s.MustDo(t, "HGET", key, "pid"); got != strconv.Itoa(a.Pid()) {
		t.Fatalf("HGET %s pid = %q right after the kill, want the killed pod's %d", key, got, a.Pid())
	}
	b := fleetPod(t, s.Addrs(), id)
	took := time.Since(killed)
	t.Logf("the id was claimed again %s after SIGKILL (ttl %s)", took.Round(time.Millisecond), testPodTTL)
	if took < testPodTTL-testPodEvery-100*time.Millisecond {
		t.Fatalf("claimed %s after the kill: before the killed pod's record could lapse", took)
	}
	if took > testPodTTL+10*time.Second {
		t.Fatalf("claimed %s after the kill, want within the TTL %s and the time to start", took, testPodTTL)
	}
	if got := s.MustDo(t, "HGET", key, "pid"); got != strconv.Itoa(b.Pid()) {
		t.Fatalf("HGET %s pid = %q, want the new pod's %d", key, got, b.Pid())
	}
	if !strings.Contains(b.Log(), "pod id held by a process that stopped refreshing") {
		t.Fatalf("the new pod did not say that it waited:\n%s", b.Log())
	}
}

// memPods is a memory log's liveness records, on the real clock.
func memPods(t *testing.T) replay.Pods {
	t.Helper()
	l, err := replay.NewMemoryLog(replay.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	ctl, _ := replay.ControlOf(l)
	return ctl.Pods
}

func testRecord(id string) replay.PodRecord {
	return replay.PodRecord{ID: id, Instance: newInstance(), Host: "h", PID: 7, Started: time.Now(), Admin: "127.0.0.1:9"}
}

var errInUse = errors.New("in use")

func inUseFor(t *testing.T, want replay.PodRecord) func(replay.PodRecord) error {
	return func(holder replay.PodRecord) error {
		if holder.Instance != want.Instance {
			t.Errorf("refused for %+v, want %+v", holder, want)
		}
		return errInUse
	}
}

// TestClaimPodLease: a lease refreshes its record until it is released; a claim
// of the same id meanwhile is refused once it has seen a refresh; after the
// release the id is free; release is safe twice and on a nil lease.
func TestClaimPodLease(t *testing.T) {
	pods := memPods(t)
	logger := slog.New(slog.DiscardHandler)
	const ttl, every = 600 * time.Millisecond, 50 * time.Millisecond
	a := testRecord("p")
	lease, err := claimPod(pods, a, ttl, every, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := claimPod(pods, testRecord("p"), ttl, every, inUseFor(t, a), logger); !errors.Is(err, errInUse) {
		t.Fatalf("claim of a live pod's id: %v", err)
	}
	if took := time.Since(start); took >= ttl {
		t.Fatalf("the refusal took %s, not less than the TTL %s: it waited for no refresh", took, ttl)
	}
	lease.release(context.Background())
	lease.release(context.Background())
	(*podIDLease)(nil).release(context.Background())
	if _, ok, err := pods.PodHolder(context.Background(), "p"); ok || err != nil {
		t.Fatalf("holder after the release: %v, %v", ok, err)
	}
}

// TestClaimPodAfterACrash: a record left by a process that stopped refreshing is
// waited out, then claimed.
func TestClaimPodAfterACrash(t *testing.T) {
	pods := memPods(t)
	const ttl, every = 500 * time.Millisecond, 50 * time.Millisecond
	if _, _, err := pods.ClaimPod(context.Background(), testRecord("p"), ttl); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := testRecord("p")
	lease, err := claimPod(pods, b, ttl, every, func(h replay.PodRecord) error { return fmt.Errorf("refused for %+v", h) }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.release(context.Background())
	if took := time.Since(start); took < ttl-every {
		t.Fatalf("claimed after %s, before the old record could lapse (ttl %s)", took, ttl)
	}
	if h, ok, _ := pods.PodHolder(context.Background(), "p"); !ok || h.Instance != b.Instance {
		t.Fatalf("holder %+v, %v; want the new process", h, ok)
	}
}

// TestClaimPodRedisLater: a pod that starts while Redis cannot be reached starts
// all the same, and its refreshes claim its id once Redis is up.
func TestClaimPodRedisLater(t *testing.T) {
	port := redistest.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := replay.NewRedisLog(ctx, replay.RedisConfig{Addrs: []string{addr}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	ctl, _ := replay.ControlOf(l)
	rec := testRecord("p")
	lease, err := claimPod(ctl.Pods, rec, 5*time.Second, 100*time.Millisecond, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start without Redis: %v", err)
	}
	defer lease.release(context.Background())
	s := redistest.StandaloneAt(t, port)
	replaytest.Eventually(t, 30*time.Second, "the record claimed once Redis is up", func() error {
		if got := s.MustDo(t, "HGET", podRecordKey("p"), "instance"); got != rec.Instance {
			return fmt.Errorf("instance %q", got)
		}
		return nil
	})
}

// TestClaimPodIDEmbedded: without Redis there is nothing to claim.
func TestClaimPodIDEmbedded(t *testing.T) {
	lease, err := claimPodID(config{}, replay.Control{}, slog.New(slog.DiscardHandler))
	if lease != nil || err != nil {
		t.Fatalf("embedded: %v, %v", lease, err)
	}
}
