// Package redistest starts real redis-server processes for tests: a standalone
// server and a 3-primary, 3-replica cluster, each node on free loopback ports in its
// own directory, with persistence off.
//
// # Sharing
//
// Starting a cluster takes seconds, so tests of one package share one standalone
// server (SharedStandalone) and one cluster (SharedCluster), started on first use.
// Tests that share them must keep to their own keys: build every room name from
// Prefix(t), which is unique per test and per call, and never flush or reconfigure a
// shared server. Tests that fail over, kill or migrate get their own cluster from
// StartCluster, stopped when the test ends. Tests of TLS and ACLs get their own
// standalone server from StandaloneWith (Options), with certificates from NewPKI.
//
// The shared servers are stopped by Teardown, which the package's TestMain calls
// after m.Run (LeakOptions shows how, with goleak). Every process is also started
// with a parent-death signal, so none outlives the test binary even when Teardown
// never runs, and a later run removes the directories such a run left behind.
//
// # Helpers
//
// Node.Do runs a command on one node through redis-cli. A Cluster finds the node
// serving a slot or key (NodeForSlot, NodeForKey, Slot), fails over (Failover),
// kills nodes (Kill waits for the failover, KillNoWait does not), waits for a
// state (WaitOK, WaitState, WaitReplicated) and moves slots (MigrateSlot, or its
// steps BeginMigration, MigrateKeys and FinishMigration to stop half way).
//
// # Missing binaries
//
// Without redis-server and redis-cli on PATH every constructor skips the test,
// except under CI=true, where a missing Redis fails it.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/polltest"
)

// Require skips t (fails it under CI=true) when redis-server or redis-cli is not on
// PATH.
func Require(t testing.TB) {
	t.Helper()
	if err := lookBinaries(); err != nil {
		unavailable(t, "redistest: %v", err)
	}
}

// unavailable skips t for something this machine's Redis lacks, or fails it under
// CI=true, where nothing the tests need may be missing.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: a missing Redis or Redis feature is a failure)", args...)
	}
	t.Skipf(format, args...)
}

func lookBinaries() error {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found on PATH", bin)
		}
	}
	return nil
}

var prefixSeq atomic.Int64

// Prefix returns a room-name prefix no other test (or other call) uses: the test's
// name reduced to room characters, then a counter. Append "." and anything of
// [A-Za-z0-9._~-] to name rooms.
func Prefix(t testing.TB) string {
	var b strings.Builder
	for _, c := range t.Name() {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 60 {
			break
		}
	}
	return fmt.Sprintf("%s-%d-%d", b.String(), os.Getpid()%100000, prefixSeq.Add(1))
}

// Node is one redis-server process started by this package.
type Node struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// Port is the client port; BusPort the cluster bus port (0 for a standalone).
	Port, BusPort int

	dir string
	id  string   // cluster node id, "" for a standalone
	cli []string // redis-cli arguments that reach the server (TLS)

	mu   sync.Mutex
	cmd  *exec.Cmd
	dead bool
}

// ID is the node's cluster id.
func (n *Node) ID() string { return n.id }

// PID is the server's process id.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// Alive reports whether the process has not been killed.
func (n *Node) Alive() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.dead
}

// Do runs one command on this node with redis-cli and returns its output, trimmed.
// An error reply is returned as an error holding the reply's text.
func (n *Node) Do(args ...string) (string, error) {
	return n.DoTimeout(5*time.Second, args...)
}

// DoTimeout is Do bounded by d.
func (n *Node) DoTimeout(d time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	full := append([]string{"-e", "-h", "127.0.0.1", "-p", strconv.Itoa(n.Port)}, n.cli...)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "redis-cli", full...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = text
		}
		if ctx.Err() != nil {
			msg = "timed out after " + d.String()
		}
		return text, fmt.Errorf("redistest: %s %s: %s", n.Addr, shorten(args), msg)
	}
	return text, nil
}

// shorten renders a command for an error message, long arguments cut.
func shorten(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 40 {
			a = a[:37] + "..."
		}
		out[i] = strings.ReplaceAll(a, "\n", " ")
	}
	return strings.Join(out, " ")
}

// MustDo is Do that fails t on an error.
func (n *Node) MustDo(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.Do(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Info returns the fields of INFO section as a map.
func (n *Node) Info(section string) (map[string]string, error) {
	out, err := n.Do("INFO", section)
	if err != nil {
		return nil, err
	}
	return parseFields(out), nil
}

// ErrorCount returns the node's count for an error prefix in INFO errorstats (for
// example "MOVED", "TRYAGAIN", "CLUSTERDOWN").
func (n *Node) ErrorCount(prefix string) (int, error) {
	m, err := n.Info("errorstats")
	if err != nil {
		return 0, err
	}
	v, ok := m["errorstat_"+prefix]
	if !ok {
		return 0, nil
	}
	v = strings.TrimPrefix(v, "count=")
	return strconv.Atoi(v)
}

// parseFields reads "k:v" lines (INFO, CLUSTER INFO).
func parseFields(s string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// kill sends SIGKILL and reaps the process. It is safe to call more than once.
func (n *Node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dead {
		return
	}
	n.dead = true
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
}

// LogCount returns how many lines of the server's log file hold substr (the
// server logs, for example, "for overcoming of output buffer limits" for each
// client it closes over its output-buffer limit).
func (n *Node) LogCount(substr string) (int, error) {
	b, err := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if err != nil {
		return 0, fmt.Errorf("redistest: log of %s: %w", n.Addr, err)
	}
	return bytes.Count(b, []byte(substr)), nil
}

// logTail returns the end of the node's log file, and what the server wrote to its
// stderr (configuration errors come before the log is open), for failure messages.
func (n *Node) logTail() string {
	var out []byte
	for _, name := range []string{"redis.stderr", "redis.log"} {
		b, err := os.ReadFile(filepath.Join(n.dir, name))
		if err != nil {
			continue
		}
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		out = append(out, b...)
	}
	return string(out)
}

// freePort returns a port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startNode starts redis-server in dir and waits until it answers PING (or, with
// opts.ACLFile, refuses it with NOAUTH). A port taken between choosing and binding it
// is retried with new ports.
func startNode(dir string, cluster bool, nodeTimeout time.Duration, opts Options) (*Node, error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		n, err := tryStartNode(dir, 0, cluster, nodeTimeout, opts)
		if err == nil {
			return n, nil
		}
		last = err
	}
	return nil, last
}

// tryStartNode starts a node on port, or on a free port when port is 0.
func tryStartNode(dir string, port int, cluster bool, nodeTimeout time.Duration, opts Options) (*Node, error) {
	var err error
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	n := &Node{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, dir: dir}
	ports := []string{"--port", strconv.Itoa(port)}
	if opts.TLS != nil {
		ports = []string{
			"--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", opts.TLS.CertFile, "--tls-key-file", opts.TLS.KeyFile,
			"--tls-ca-cert-file", opts.TLS.CAFile, "--tls-auth-clients", "no",
		}
		n.cli = []string{"--tls", "--cacert", opts.TLS.CAFile}
	}
	args := append(ports,
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"),
		// A replica's first sync starts at once instead of after the default 5s.
		"--repl-diskless-sync-delay", "0",
	)
	if cluster {
		if n.BusPort, err = freePort(); err != nil {
			return nil, err
		}
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(n.BusPort),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		)
	}
	if opts.ACLFile != "" {
		args = append(args, "--aclfile", opts.ACLFile)
	}
	args = append(args, opts.Args...)
	_ = os.Remove(filepath.Join(dir, "nodes.conf"))
	stderr, err := os.Create(filepath.Join(dir, "redis.stderr"))
	if err != nil {
		return nil, fmt.Errorf("redistest: start redis-server: %w", err)
	}
	defer stderr.Close() // the child has its own copy
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: start redis-server: %w", err)
	}
	n.cmd = cmd
	exited := false
	err = polltest.Until(10*time.Second, func() error {
		out, err := n.DoTimeout(time.Second, "PING")
		if err == nil && out == "PONG" {
			return nil
		}
		if opts.ACLFile != "" && err != nil && strings.Contains(err.Error(), "NOAUTH") {
			return nil // up, and its default user is off
		}
		if exitedNoHang(cmd.Process.Pid) {
			exited = true
			return nil // nothing left to wait for
		}
		if err == nil {
			err = fmt.Errorf("PING answered %q", out)
		}
		return err
	})
	switch {
	case exited:
		n.mu.Lock()
		n.dead = true
		n.mu.Unlock()
		return nil, fmt.Errorf("redistest: redis-server on %s %w: %s", n.Addr, errExited, n.logTail())
	case err != nil:
		n.kill()
		return nil, fmt.Errorf("redistest: redis-server on %s not answering: %w: %s", n.Addr, err, n.logTail())
	}
	return n, nil
}

// Server is a standalone redis-server.
type Server struct {
	*Node
}

// Addrs returns the server's address as a seed list.
func (s *Server) Addrs() []string { return []string{s.Addr} }

// Standalone starts a standalone server for t alone, stopped when t ends.
func Standalone(t testing.TB) *Server {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	n, err := startNode(dir, false, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.kill)
	return &Server{Node: n}
}

// shared holds the package's shared servers.
var shared struct {
	mu         sync.Mutex
	standalone *Server
	saErr      error
	cluster    *Cluster
	clErr      error
	dirs       []string
}

// SharedStandalone returns the standalone server shared by the tests of this test
// binary, starting it on first use. See the package documentation for the rules.
func SharedStandalone(t testing.TB) *Server {
	t.Helper()
	Require(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.standalone == nil && shared.saErr == nil {
		dir, err := sharedDir()
		if err == nil {
			var n *Node
			if n, err = startNode(dir, false, 0, Options{}); err == nil {
				shared.standalone = &Server{Node: n}
			}
		}
		shared.saErr = err
	}
	if shared.saErr != nil {
		t.Fatalf("redistest: shared standalone: %v", shared.saErr)
	}
	return shared.standalone
}

// SharedCluster returns the cluster shared by the tests of this test binary,
// starting it on first use. See the package documentation for the rules.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil && shared.clErr == nil {
		dir, err := sharedDir()
		if err == nil {
			shared.cluster, err = startCluster(dir, ClusterConfig{})
		}
		shared.clErr = err
	}
	if shared.clErr != nil {
		t.Fatalf("redistest: shared cluster: %v", shared.clErr)
	}
	return shared.cluster
}

// Teardown stops the shared servers and removes their directories. Call it from
// TestMain after m.Run; it is safe to call when nothing was started.
func Teardown() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.standalone != nil {
		shared.standalone.kill()
	}
	if shared.cluster != nil {
		shared.cluster.stop()
	}
	for _, d := range shared.dirs {
		_ = os.RemoveAll(d)
	}
	shared.standalone, shared.cluster, shared.dirs = nil, nil, nil
	shared.saErr, shared.clErr = nil, nil
}

// sharedDir makes a directory for a shared server. It first removes directories that
// earlier test binaries left behind (their owner process is gone), so a run without
// Teardown leaves nothing behind for long. Called with shared.mu held.
func sharedDir() (string, error) {
	reapStaleDirs()
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return "", err
	}
	shared.dirs = append(shared.dirs, dir)
	return dir, nil
}

func reapStaleDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "redistest-*"))
	for _, d := range matches {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || !processGone(pid) {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// errExited is what starting a server returns when the server exits at start.
var errExited = errors.New("exited at start")

// errNotReady is what a readiness poll returns while it should keep polling.
var errNotReady = errors.New("not ready")

// LogFile is the path of the node's log file, for tests that look for what the
// server said (a client it closed, and why).
func (n *Node) LogFile() string { return filepath.Join(n.dir, "redis.log") }
