package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
)

// The test binary doubles as the gateway: with ROOMCAST_TEST_MAIN=1 it runs main, so
// process-level tests need no separate build.
func TestMain(m *testing.M) {
	if os.Getenv("ROOMCAST_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	code := m.Run()
	redistest.Teardown()
	os.Exit(code)
}

type proc struct {
	cmd    *exec.Cmd
	public string
	admin  string
	exited chan error
}

// startGateway runs the gateway as a child process on ports the kernel picks and
// waits for its start-up log line.
func startGateway(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "ROOMCAST_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan error, 1)}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			var line struct{ Msg, Addr, AdminAddr string }
			_ = json.Unmarshal(sc.Bytes(), &struct {
				Msg       *string `json:"msg"`
				Addr      *string `json:"addr"`
				AdminAddr *string `json:"admin_addr"`
			}{&line.Msg, &line.Addr, &line.AdminAddr})
			if line.Msg == "roomcast gateway started" {
				once.Do(func() { p.public, p.admin = "http://"+line.Addr, "http://"+line.AdminAddr; close(started) })
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	select {
	case <-started:
	case err := <-p.exited:
		t.Fatalf("gateway exited before starting: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not start within 20s")
	}
	return p
}

func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("gateway still running after %s", within)
		return -1
	}
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
		res, err := http.Get(p.public + "/rooms/r/events")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b, err := io.ReadAll(res.Body)
			results <- result{string(b), err}
		}()
	}
	pub, err := http.Post(p.public+"/rooms/r/events", "application/json", strings.NewReader(`{"hello":1}`))
	if err != nil || pub.StatusCode != 201 {
		t.Fatalf("publish: %v %v", pub, err)
	}

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The pod keeps serving while it drains, and reports not ready.
	awaitNotReady(t, p)
	for i := 0; i < n; i++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("stream %d ended with an error: %v", i, r.err)
		}
		if !strings.Contains(r.tail, `"hello":1`) {
			t.Fatalf("stream %d never got the event: %q", i, r.tail)
		}
		frames := strings.Split(strings.TrimSpace(r.tail), "\n\n")
		last := frames[len(frames)-1]
		if !strings.HasPrefix(last, "retry: ") {
			t.Fatalf("stream %d did not end with a retry hint: %q", i, last)
		}
	}
	if code := p.wait(t, 5*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("drain took %s with a 300ms delay and a 600ms window", took)
	}
}

func TestSecondSignalForcesExit(t *testing.T) {
	p := startGateway(t, "--drain-delay", "30s", "--drain-window", "30s", "--drain-timeout", "90s")
	res, err := http.Get(p.public + "/rooms/r/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	awaitNotReady(t, p)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 10*time.Second); code != 0 {
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
			cmd := exec.Command(os.Args[0], append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, args...)...)
			cmd.Env = append(os.Environ(), "ROOMCAST_TEST_MAIN=1")
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want code 2", err)
			}
		})
	}
}

// awaitNotReady polls /readyz until the signal has been handled (nothing announces
// it otherwise).
func awaitNotReady(t *testing.T, p *proc) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		r, err := http.Get(p.public + "/readyz")
		if err != nil {
			t.Fatalf("readyz while draining: %v", err)
		}
		r.Body.Close()
		if r.StatusCode == http.StatusServiceUnavailable {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("readyz never turned 503")
}
