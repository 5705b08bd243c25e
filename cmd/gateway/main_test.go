package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// The test binary doubles as the gateway: with ROOMCAST_TEST_MAIN=1 it runs main, so
// process-level tests need no separate build. ROOMCAST_TEST_NOFILE=N first sets its
// open-file limit, soft and hard, to N.
func TestMain(m *testing.M) {
	if os.Getenv("ROOMCAST_TEST_MAIN") == "1" {
		if n := os.Getenv("ROOMCAST_TEST_NOFILE"); n != "" {
			if err := setOpenFileLimit(n); err != nil {
				fmt.Fprintln(os.Stderr, "ROOMCAST_TEST_NOFILE:", err)
				os.Exit(1)
			}
		}
		os.Exit(run(os.Args[1:]))
	}
	code := gatewaytest.RedactionMain(m.Run)
	redistest.Teardown()
	os.Exit(code)
}

// startGateway runs the gateway as a child process on ports the kernel picks, waits
// for its start-up line, and kills it when t ends if it still runs.
func startGateway(t *testing.T, args ...string) *gatewaytest.Process {
	t.Helper()
	return startGatewayWith(t, gatewaytest.Options{Args: args})
}

// startGatewayWith is startGateway with every launch option; Bin and Env are set here.
func startGatewayWith(t *testing.T, o gatewaytest.Options) *gatewaytest.Process {
	t.Helper()
	o.Bin, o.Env = os.Args[0], append(o.Env, "ROOMCAST_TEST_MAIN=1")
	p, err := gatewaytest.Launch(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("gateway log:\n%s", p.Log())
		}
	})
	return p
}

// runGateway runs the gateway process to its exit and returns its exit code and
// stderr: for configurations it must refuse. The deadline only stops a gateway that
// wrongly started.
func runGateway(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "ROOMCAST_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gateway %v still running after 30s (it started): %s", args, stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// wait returns the gateway's exit code, failing t if it still runs after within.
func wait(t *testing.T, p *gatewaytest.Process, within time.Duration) int {
	t.Helper()
	code, err := p.Wait(within)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func TestSIGTERMDrainsEveryStreamAndExitsZero(t *testing.T) {
	p := startGateway(t, "--drain-delay", "300ms", "--drain-window", "600ms", "--drain-timeout", "5s",
		"--retry-min", "100ms", "--retry-max", "200ms")
	type result struct {
		tail string
		err  error
	}
	const n = 8
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		res, err := http.Get(p.Public + "/rooms/r/events")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b, err := io.ReadAll(res.Body)
			results <- result{string(b), err}
		}()
	}
	pub, err := http.Post(p.Public+"/rooms/r/events", "application/json", strings.NewReader(`{"hello":1}`))
	if err != nil || pub.StatusCode != 201 {
		t.Fatalf("publish: %v %v", pub, err)
	}

	start := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The pod keeps serving while it drains, and reports not ready.
	awaitNotReady(t, p)
	for i := 0; i < n; i++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("stream %d ended with an error: %v", i, r.err)
		}
		var frames []gatewaytest.Frame
		dec := gatewaytest.NewDecoder(bufio.NewReader(strings.NewReader(r.tail)), nil)
		for {
			f, err := dec.NextFrame()
			if err != nil {
				break
			}
			frames = append(frames, f)
		}
		if !slices.ContainsFunc(frames, func(f gatewaytest.Frame) bool { return strings.Contains(f.Data, `"hello":1`) }) {
			t.Fatalf("stream %d never got the event: %q", i, r.tail)
		}
		if last := frames[len(frames)-1]; last.Retry < 0 || last.HasData {
			t.Fatalf("stream %d did not end with a retry hint: %+v", i, last)
		}
	}
	if code := wait(t, p, 5*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("drain took %s with a 300ms delay and a 600ms window", took)
	}
}

func TestSecondSignalForcesExit(t *testing.T) {
	p := startGateway(t, "--drain-delay", "30s", "--drain-window", "30s", "--drain-timeout", "90s")
	res, err := http.Get(p.Public + "/rooms/r/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_ = p.Signal(syscall.SIGTERM)
	awaitNotReady(t, p)
	_ = p.Signal(syscall.SIGINT)
	if code := wait(t, p, 10*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestBadConfigurationExitsTwo(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown flag":       {"--nope"},
		"retry range":        {"--retry-min", "5s", "--retry-max", "1s"},
		"drain beyond grace": {"--drain-delay", "30s", "--drain-window", "30s", "--drain-timeout", "45s"},
	} {
		t.Run(name, func(t *testing.T) {
			code, stderr := runGateway(t, append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, args...)...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2:\n%s", code, stderr)
			}
		})
	}
}

// awaitNotReady polls /readyz until the signal has been handled (nothing announces
// it otherwise).
func awaitNotReady(t *testing.T, p *gatewaytest.Process) {
	t.Helper()
	replaytest.Eventually(t, 5*time.Second, "readyz 503 while draining", func() error {
		r, err := http.Get(p.Public + "/readyz")
		if err != nil {
			t.Fatalf("readyz while draining: %v", err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("readyz %d", r.StatusCode)
		}
		return nil
	})
}
