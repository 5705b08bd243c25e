//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the side the test reads and the side the
// gateway writes its stderr to.
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	c, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no pseudo-terminal here: %v; CI=true requires the terminal start-up tests to run", err)
		}
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := unix.IoctlSetPointerInt(int(c.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(c.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	term, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pseudo-terminal: %v", err)
	}
	return c, term
}

// terminalGateway is a gateway whose stderr is a terminal, and the lines it wrote.
type terminalGateway struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
}

func startOnTerminal(t *testing.T, args ...string) *terminalGateway {
	t.Helper()
	c, term := openPTY(t)
	return startWriting(t, c, term, args...)
}

// startWriting starts a gateway whose stderr is out; the test reads it from in.
func startWriting(t *testing.T, in io.Reader, out *os.File, args ...string) *terminalGateway {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "ROOMCAST_TEST_MAIN=1")
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	g := &terminalGateway{cmd: cmd, lines: make(chan string, 100), done: make(chan error, 1)}
	go func() {
		s := bufio.NewScanner(in)
		for s.Scan() {
			g.lines <- strings.TrimRight(s.Text(), "\r")
		}
		close(g.lines)
	}()
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-g.done
	})
	return g
}

// until returns the lines written up to and including the first that contains
// want, failing t if none does within 30s.
func (g *terminalGateway) until(t *testing.T, want string) []string {
	t.Helper()
	var seen []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-g.lines:
			if !ok {
				t.Fatalf("the gateway's terminal closed before a line with %q:\n%s", want, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if strings.Contains(l, want) {
				return seen
			}
		case <-timeout:
			t.Fatalf("no line with %q within 30s:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

// TestTerminalStartupAndCtrlC: on a terminal the gateway says where its pages are,
// which log it runs on and what anonymous clients may do, in lines for a person, not
// JSON; the first Ctrl-C says it drains and that a second stops at once, and the
// second does, long before the drain delay is over.
func TestTerminalStartupAndCtrlC(t *testing.T) {
	g := startOnTerminal(t, "--drain-delay", "60s", "--drain-window", "10s", "--drain-timeout", "2m")
	start := g.until(t, "Press Ctrl-C a second time to stop at once.")
	text := strings.Join(start, "\n")
	for _, want := range []string{"roomcast gateway started", "demo page", "operator page", "log            embedded, in memory",
		"reading        every room, by anyone", "publishing     only from loopback", "To stop, press Ctrl-C: the gateway serves 1m more, then closes streams over up to 10s."} {
		if !strings.Contains(text, want) {
			t.Errorf("the start-up lacks %q:\n%s", want, text)
		}
	}
	for _, l := range start {
		if strings.HasPrefix(l, "{") {
			t.Errorf("a JSON line on a terminal: %s", l)
		}
		if len(l) > 120 {
			t.Errorf("a line of %d characters: %s", len(l), l)
		}
		// The demo page's URL is one a person can open.
		if url, ok := strings.CutPrefix(strings.TrimSpace(l), "demo page"); ok {
			res, err := http.Get(strings.TrimSpace(url))
			if err != nil {
				t.Fatalf("the demo page's URL: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %d", strings.TrimSpace(url), res.StatusCode)
			}
		}
	}
	if err := g.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	g.until(t, "Ctrl-C: draining for up to 1m10s; press Ctrl-C again to stop now")
	stopped := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	g.until(t, "Ctrl-C again: closing every stream now")
	select {
	case err := <-g.done:
		if err != nil {
			t.Fatalf("the gateway stopped with %v", err)
		}
		g.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway still runs 10s after the second Ctrl-C (drain delay 60s)")
	}
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("the second Ctrl-C took %s to stop the gateway", took)
	}
}

// TestTerminalLogFormatJSON: --log-format json keeps JSON on a terminal.
func TestTerminalLogFormatJSON(t *testing.T) {
	g := startOnTerminal(t, "--log-format", "json")
	lines := g.until(t, `"msg":"roomcast gateway started"`)
	if l := lines[len(lines)-1]; !strings.HasPrefix(l, "{") || !strings.Contains(l, `"log_format":"json"`) {
		t.Fatalf("start-up line on a terminal with --log-format json: %s", l)
	}
}

// TestLogFormatTextOnAPipe: --log-format text writes for a person where stderr is
// no terminal; a SIGTERM is announced in words and the gateway stops.
func TestLogFormatTextOnAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	g := startWriting(t, r, w, "--log-format", "text", "--drain-delay", "0s", "--drain-window", "0s", "--publish-token", "tok-never-shown")
	lines := g.until(t, "Press Ctrl-C a second time to stop at once.")
	text := strings.Join(lines, "\n")
	if strings.Contains(text, "{") || strings.Contains(text, "tok-never-shown") {
		t.Fatalf("the text start-up shows JSON or the token:\n%s", text)
	}
	if !strings.Contains(text, "publishing     needs a --publish-token token") {
		t.Errorf("the start-up does not say publishing needs the token:\n%s", text)
	}
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g.until(t, "terminated: closing every stream and stopping")
	g.until(t, "roomcast gateway stopped (exit code 0)")
}
