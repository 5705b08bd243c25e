package gatewaytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// StartedMsg is the gateway's log message once both listeners accept.
const StartedMsg = "roomcast gateway started"

// Log bounds: a process keeps at most this many lines (the first ones are kept, then
// the last ones), each cut to maxLogLine bytes.
const (
	maxLogLines = 2000
	maxLogLine  = 4 << 10
)

// Options describe a gateway process to launch.
type Options struct {
	// Name tells processes apart in messages; default "gateway".
	Name string
	// Bin is the gateway binary: one Build made, or os.Args[0] for a test binary
	// whose TestMain runs the gateway's main when Env says so.
	Bin string
	// Args are the gateway's flags. Unless they name them, --addr and --admin-addr
	// are 127.0.0.1:0 (the kernel picks the ports; the start-up line says which),
	// and a pod of a fleet (Args name --redis) gets a --pod-id of its own (Name, then
	// a number unique to this process): every pod on one host would otherwise take
	// the hostname, and a pod whose id a live pod of the same Redis holds refuses to
	// start.
	Args []string
	// Env is added to the test's environment.
	Env []string
	// OnLog, if set, sees every log line (a JSON object), on the reading goroutine.
	OnLog func(line []byte)
	// StartTimeout bounds the wait for the start-up line; default 30s.
	StartTimeout time.Duration
}

// Process is one gateway process. Its methods are safe for concurrent use.
type Process struct {
	Name string
	// Public and Admin are the listeners' base URLs, "http://127.0.0.1:port".
	Public, Admin string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped

	mu       sync.Mutex
	exitCode int       // valid after done; -1 when killed by a signal
	exitErr  error     // what Wait returned
	exitedAt time.Time // valid after done
	logs     []string
	dropped  int
}

// Launch starts a gateway and waits for its start-up line. It needs no testing.T,
// so it may run on any goroutine; Start is the usual way in.
func Launch(o Options) (*Process, error) {
	if o.Name == "" {
		o.Name = "gateway"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	args := o.Args
	if !hasFlag(args, "addr") {
		args = append([]string{"--addr", "127.0.0.1:0"}, args...)
	}
	if !hasFlag(args, "admin-addr") {
		args = append([]string{"--admin-addr", "127.0.0.1:0"}, args...)
	}
	if hasFlag(args, "redis") && !hasFlag(args, "pod-id") {
		args = append([]string{"--pod-id", podID(o.Name)}, args...)
	}
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = append(os.Environ(), o.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: launch %s: %w", o.Name, err)
	}
	cmd.Stdout = nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gatewaytest: launch %s: %w", o.Name, err)
	}
	p := &Process{Name: o.Name, cmd: cmd, done: make(chan struct{})}
	started := make(chan [2]string, 1)
	go p.read(bufio.NewReaderSize(stderr, 64<<10), o.OnLog, started)
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case addrs := <-started:
		p.Public, p.Admin = "http://"+addrs[0], "http://"+addrs[1]
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("gatewaytest: %s exited (%v) before starting:\n%s", o.Name, p.exitErr, p.Log())
	case <-timer.C:
		p.Kill()
		return nil, fmt.Errorf("gatewaytest: %s did not start within %s:\n%s", o.Name, o.StartTimeout, p.Log())
	}
}

// Start launches a gateway for t: it fails t when the gateway does not start, and
// when t ends it stops the process (SIGTERM, see Stop) and prints its log if t
// failed.
func Start(t testing.TB, o Options) *Process {
	t.Helper()
	p, err := Launch(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("log of %s (pid %d):\n%s", p.Name, p.Pid(), p.Log())
		}
	})
	return p
}

// podIDs numbers the pod ids Launch gives.
var podIDs atomic.Int64

// podID is a pod id no other launch of this process gives: name reduced to
// letters, digits and '-', then the process id and a counter.
func podID(name string) string {
	b := []byte(name)
	if len(b) > 64 {
		b = b[:64]
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	return fmt.Sprintf("%s-%d-%d", b, os.Getpid(), podIDs.Add(1))
}

func hasFlag(args []string, name string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		a = strings.TrimLeft(a, "-")
		return a == name || strings.HasPrefix(a, name+"=")
	})
}

// read consumes the process's log until it ends, then reaps the process.
func (p *Process) read(r *bufio.Reader, onLog func([]byte), started chan<- [2]string) {
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// An overlong line: keep its start, skip the rest.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			var head struct {
				Msg       string `json:"msg"`
				Addr      string `json:"addr"`
				AdminAddr string `json:"admin_addr"`
			}
			captureLog(line)
			// OnLog and Log see the start-up line before Launch returns.
			if onLog != nil {
				onLog(line)
			}
			p.keep(line)
			if json.Unmarshal(line, &head) == nil && head.Msg == StartedMsg {
				select {
				case started <- [2]string{head.Addr, head.AdminAddr}:
				default:
				}
			}
		}
		if err != nil {
			break
		}
	}
	err := p.cmd.Wait()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		code = -1
	}
	p.mu.Lock()
	p.exitCode, p.exitErr, p.exitedAt = code, err, time.Now()
	p.mu.Unlock()
	close(p.done)
}

func (p *Process) keep(line []byte) {
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.logs) >= maxLogLines {
		// Keep the first half and a window of the latest lines.
		half := maxLogLines / 2
		p.dropped++
		copy(p.logs[half:], p.logs[half+1:])
		p.logs = p.logs[:len(p.logs)-1]
	}
	p.logs = append(p.logs, string(line))
}

// Log returns the lines the process logged (bounded; see maxLogLines).
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.Join(p.logs, "\n")
	if p.dropped > 0 {
		s += fmt.Sprintf("\n(%d lines left out in the middle)", p.dropped)
	}
	return s
}

// Addr and AdminAddr return the listeners as host:port.
func (p *Process) Addr() string      { return strings.TrimPrefix(p.Public, "http://") }
func (p *Process) AdminAddr() string { return strings.TrimPrefix(p.Admin, "http://") }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process; it is a no-op once the process has ended.
func (p *Process) Signal(sig os.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("gatewaytest: signal %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Kill ends the process at once and waits until it has been reaped.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Done is closed once the process has ended and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not ended yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exit returns the exit code (-1 for a signal) and when the process was reaped;
// valid once Done is closed.
func (p *Process) Exit() (code int, at time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.exitedAt, p.exitErr
}

// Wait waits up to within for the process to end and returns its exit code.
func (p *Process) Wait(within time.Duration) (int, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-p.done:
		code, _, _ := p.Exit()
		return code, nil
	case <-t.C:
		return 0, fmt.Errorf("gatewaytest: %s still running after %s", p.Name, within)
	}
}

// Stop ends the process the way an orchestrator does: SIGTERM (a drain), a second
// SIGTERM after within (the gateway then closes every stream at once), and SIGKILL
// if it still runs within after that, which Stop reports as an error. Calling it
// again, or after the process ended, is harmless.
func (p *Process) Stop(within time.Duration) error {
	for range 2 {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		if _, err := p.Wait(within); err == nil {
			return nil
		}
	}
	p.Kill()
	return fmt.Errorf("gatewaytest: %s (pid %d) ignored two SIGTERMs; killed", p.Name, p.Pid())
}

// Build builds the module's ./cmd/gateway into dir and returns the binary's path.
// It finds the module from the working directory (go env GOMOD).
func Build(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("gatewaytest: build: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("gatewaytest: build: not inside the module")
	}
	bin := filepath.Join(dir, "gateway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	cmd.Dir = filepath.Dir(gomod)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gatewaytest: go build ./cmd/gateway: %w\n%s", err, buf.String())
	}
	return bin, nil
}
