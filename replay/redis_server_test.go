package replay_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
)

// startRedisWith starts a standalone redis-server for t alone with extra
// configuration (TLS, ACL) that the shared servers of redistest do not take. It
// listens on 127.0.0.1 only; the returned port is the one the server answers on
// (its plain or its TLS port, as extra says). It returns an error when the server
// exits at start (a build without TLS, say), with the tail of its log.
func startRedisWith(t *testing.T, extra ...string) (port int, logTail func() string, err error) {
	t.Helper()
	redistest.Require(t)
	dir := t.TempDir()
	port = redistest.FreePort(t)
	logFile := filepath.Join(dir, "redis.log")
	args := append([]string{
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--logfile", logFile,
	}, extra...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "PORT", strconv.Itoa(port))
	}
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	logTail = func() string {
		b, _ := os.ReadFile(logFile)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return strings.Join(lines[max(0, len(lines)-5):], "\n")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return 0, logTail, &startError{logTail()}
		default:
		}
		if ready(logFile) {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
			if err == nil {
				c.Close()
				return port, logTail, nil
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d not ready after 10s: %s", port, logTail())
		}
		time.Sleep(20 * time.Millisecond) // polling a process that announces nothing else
	}
}

type startError struct{ log string }

func (e *startError) Error() string { return "redis-server exited at start: " + e.log }

// ready reports whether the server's log says it accepts connections.
func ready(logFile string) bool {
	f, err := os.Open(logFile)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Ready to accept connections") {
			return true
		}
	}
	return false
}
