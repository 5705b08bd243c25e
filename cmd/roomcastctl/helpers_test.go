package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

func TestMain(m *testing.M) {
	code := gatewaytest.RedactionMain(func() int {
		code := m.Run()
		if gatewayDir != "" {
			os.RemoveAll(gatewayDir)
		}
		if code == 0 {
			if err := goleak.Find(); err != nil {
				os.Stderr.WriteString("goleak: " + err.Error() + "\n")
				return 1
			}
		}
		return code
	})
	os.Exit(code)
}

// The gateway binary, built once for the test binary.
var (
	gatewayOnce sync.Once
	gatewayBin  string
	gatewayDir  string
	gatewayErr  error
)

// startPod runs a real gateway process with args; it is stopped when t ends. It
// drains without the preStop delay unless args say otherwise.
func startPod(t *testing.T, args ...string) *gatewaytest.Process {
	t.Helper()
	gatewayOnce.Do(func() {
		gatewayDir, gatewayErr = os.MkdirTemp("", "roomcastctl-test-")
		if gatewayErr == nil {
			gatewayBin, gatewayErr = gatewaytest.Build(gatewayDir)
		}
	})
	if gatewayErr != nil {
		t.Fatal(gatewayErr)
	}
	args = append([]string{"--drain-delay", "0s"}, args...)
	return gatewaytest.Start(t, gatewaytest.Options{Bin: gatewayBin, Args: args})
}

// deadURL is an http URL where nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

// ctl runs roomcastctl in-process with an environment of its own (never the
// test's), and checks that no credential it was given shows in its output.
type ctl struct {
	t       *testing.T
	env     map[string]string
	secrets []string // must never be printed
}

func newCtl(t *testing.T, env ...string) *ctl {
	c := &ctl{t: t, env: map[string]string{}}
	for i := 0; i+1 < len(env); i += 2 {
		c.env[env[i]] = env[i+1]
		if strings.HasSuffix(env[i], "TOKEN") {
			c.secrets = append(c.secrets, env[i+1])
		}
	}
	return c
}

// secret registers s as a credential the output must not contain, and returns it.
func (c *ctl) secret(s string) string {
	c.secrets = append(c.secrets, gatewaytest.Secret("a roomcastctl test credential", s))
	return s
}

type result struct {
	code        int
	out, errOut string
}

// run runs one invocation to its end with stdin.
func (c *ctl) run(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, stdio{in: strings.NewReader(stdin), out: &out, err: &errOut, getenv: c.getenv})
	r := result{code: code, out: out.String(), errOut: errOut.String()}
	c.checkSecrets(r.out + r.errOut)
	return r
}

func (c *ctl) getenv(k string) string { return c.env[k] }

func (c *ctl) checkSecrets(s string) {
	c.t.Helper()
	for _, sec := range c.secrets {
		if sec != "" && strings.Contains(s, sec) {
			c.t.Errorf("a credential was printed:\n%s", strings.ReplaceAll(s, sec, "<credential>"))
		}
	}
}

// running is an invocation that runs in the background (tail): its output lines
// arrive on lines, and done carries its exit code.
type running struct {
	lines  chan string
	done   chan int
	cancel context.CancelFunc
	errOut *syncBuffer
}

// start runs an invocation in the background; t's end cancels and waits for it.
func (c *ctl) start(args ...string) *running {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	r := &running{lines: make(chan string, 4096), done: make(chan int, 1), cancel: cancel, errOut: &syncBuffer{}}
	go func() {
		code := run(ctx, args, stdio{in: strings.NewReader(""), out: pw, err: r.errOut, getenv: c.getenv})
		pw.Close()
		r.done <- code
	}()
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.checkSecrets(sc.Text())
			r.lines <- sc.Text()
		}
		io.Copy(io.Discard, pr)
	}()
	c.t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			c.t.Error("roomcastctl still running 30s after its context ended")
		}
		for range r.lines {
		}
		c.checkSecrets(r.errOut.String())
	})
	return r
}

// line returns the next output line, failing t after within.
func (r *running) line(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-r.lines:
		if !ok {
			t.Fatalf("output ended; stderr:\n%s", r.errOut.String())
		}
		return l
	case <-time.After(within):
		t.Fatalf("no output line within %s; stderr:\n%s", within, r.errOut.String())
	}
	return ""
}

// exit waits for the invocation's exit code.
func (r *running) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case code := <-r.done:
		r.done <- code
		return code
	case <-time.After(within):
		t.Fatalf("still running after %s; stderr:\n%s", within, r.errOut.String())
	}
	return -1
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
