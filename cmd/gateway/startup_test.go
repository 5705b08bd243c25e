package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

func TestBrokenFlagsExitTwoWithOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--heartbeat", "1ns"}, "--heartbeat"},
		{[]string{"--write-timeout", "1ns"}, "--write-timeout"},
		{[]string{"--queue", "50000000"}, "--queue"},
		{[]string{"--retry-max", "9999h"}, "--retry-max"},
		{[]string{"--retry-min", "1ns"}, "--retry-min"},
		{[]string{"--history-ttl", "1ns"}, "--history-ttl"},
		{[]string{"--accept-rate", "NaN"}, "--accept-rate"},
		{[]string{"--admin-addr", ""}, "--admin-addr"},
		{[]string{"--addr", "nonsense"}, "--addr"},
		{[]string{"--queue", "0"}, "--queue"},
		{[]string{"--max-queued-bytes", "lots"}, "--max-queued-bytes"},
		{[]string{"--retry-min", "5s", "--retry-max", "1s"}, "--retry-min"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stderr := runGateway(t, append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, tc.args...)...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "gateway: ") || !strings.Contains(lines[0], tc.flag) {
				t.Fatalf("want one line naming %s, got:\n%s", tc.flag, stderr)
			}
		})
	}
}

func TestListenFailureExitsTwo(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	code, stderr := runGateway(t, "--addr", busy.Addr().String(), "--admin-addr", "127.0.0.1:0")
	if code != 2 {
		t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "--addr") {
		t.Fatalf("the error does not name --addr:\n%s", stderr)
	}
}

// started is a running gateway and its start-up log line.
type started struct {
	*gatewaytest.Process
	startLine []byte
}

// startForLine starts the gateway like startGateway and keeps its start-up line.
func startForLine(t *testing.T, args ...string) *started {
	t.Helper()
	return startForLineWith(t, gatewaytest.Options{Args: args})
}

// startForLineWith is startForLine with every launch option but OnLog.
func startForLineWith(t *testing.T, o gatewaytest.Options) *started {
	t.Helper()
	var line atomic.Pointer[[]byte]
	o.OnLog = func(l []byte) {
		var m struct{ Msg string }
		if line.Load() == nil && json.Unmarshal(l, &m) == nil && m.Msg == gatewaytest.StartedMsg {
			c := bytes.Clone(l)
			line.Store(&c)
		}
	}
	p := startGatewayWith(t, o)
	return &started{Process: p, startLine: *line.Load()}
}

func startLine(t *testing.T, p *started) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(p.startLine, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStartupLogPrintsValuesInEffect(t *testing.T) {
	p := startForLine(t, "--publish-token", "tok-never-logged", "--linger", "0", "--queue", "64", "--heartbeat", "7s",
		"--room-policy", "ticker.*=latest")
	line := startLine(t, p)
	want := map[string]any{
		"heartbeat": "7s", "queue": float64(64), "linger": "0s", "history": float64(1000), "history_ttl": "24h",
		"write_timeout": "10s", "max_queued_bytes": float64(1 << 30), "accept_rate": float64(1000),
		"max_streams_per_ip": float64(100), "drain_timeout": "45s", "publish_token_set": true, "log": "memory",
		"room_policy": "ticker.*=latest",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("start-up line %s = %v (%T), want %v", k, line[k], line[k], v)
		}
	}
	for _, k := range []string{"redis_timeout", "publish_wait_replicas", "max_rooms", "max_history_bytes", "retry_min",
		"retry_max", "queue_bytes", "accept_burst", "max_streams", "client_ip_header", "max_body", "max_batch_body",
		"drain_delay", "drain_window", "log_level", "redis"} {
		if _, ok := line[k]; !ok {
			t.Errorf("start-up line lacks %s", k)
		}
	}
	if bytes.Contains(p.startLine, []byte("tok-never-logged")) {
		t.Fatalf("the start-up line shows the token: %s", p.startLine)
	}
	res, err := http.Get(p.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, name := range []string{"roomcast_queued_bytes ", `roomcast_client_drops_total{reason="queue_budget"} `, "roomcast_log_rooms ", "roomcast_log_bytes ", "roomcast_log_evictions_total ", "go_sched_latencies_seconds_bucket"} {
		if !bytes.Contains(metrics, []byte("\n"+name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestPublishTokenFromFile(t *testing.T) {
	const token = "file-token-3f9a"
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("  "+token+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startForLine(t, "--publish-token-file", path)

	publish := func(auth string) int {
		req, _ := http.NewRequest("POST", p.Public+"/rooms/r/events", strings.NewReader(`{"a":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := publish("Bearer " + token); code != http.StatusCreated {
		t.Fatalf("publish with the file's token: %d", code)
	}
	if code := publish("Bearer nope"); code != http.StatusUnauthorized {
		t.Fatalf("publish with another token: %d", code)
	}
	res, err := http.Get(p.Admin + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	cmdline, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(cmdline), "publish-token-file") {
		t.Fatalf("cmdline %q does not show the flag: the check below proves nothing", cmdline)
	}
	if strings.Contains(string(cmdline), token) {
		t.Fatalf("pprof cmdline shows the token: %q", cmdline)
	}
	if bytes.Contains(p.startLine, []byte(token)) {
		t.Fatalf("the start-up line shows the token: %s", p.startLine)
	}
}

func TestPublishTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	blank := filepath.Join(dir, "blank")
	good := filepath.Join(dir, "good")
	_ = os.WriteFile(empty, nil, 0o600)
	_ = os.WriteFile(blank, []byte(" \n\t\n"), 0o600)
	_ = os.WriteFile(good, []byte("secret-in-file\n"), 0o600)
	for name, args := range map[string][]string{
		"empty file":   {"--publish-token-file", empty},
		"blank file":   {"--publish-token-file", blank},
		"missing file": {"--publish-token-file", filepath.Join(dir, "missing")},
		"both":         {"--publish-token-file", good, "--publish-token", "secret-on-flag"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig(args, noEnvironment, io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "--publish-token-file") {
				t.Fatalf("message does not name --publish-token-file: %v", err)
			}
			if strings.Contains(err.Error(), "secret-") {
				t.Fatalf("message shows a token: %v", err)
			}
		})
	}
	c, err := parseConfig([]string{"--publish-token-file", good}, noEnvironment, io.Discard)
	if err != nil || c.PublishToken != "secret-in-file" {
		t.Fatalf("token %q, err %v", c.PublishToken, err)
	}
	c, err = parseConfig([]string{"--publish-token", " padded \n"}, noEnvironment, io.Discard)
	if err != nil || c.PublishToken != "padded" {
		t.Fatalf("--publish-token is not trimmed like the presented one: %q, %v", c.PublishToken, err)
	}
}

func TestRedisSecretsAreNeverPrinted(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close() // nothing listens there now: the connect fails
	for _, redis := range []string{
		"redis://roomcast:pw-s3cret-1@" + addr,
		"roomcast:pw-s3cret-1@" + addr,
		"redis://:pw-s3cret-1@" + addr + ",127.0.0.1:1",
	} {
		t.Run(redis, func(t *testing.T) {
			// The pod starts without its Redis and says so; neither line may show
			// the password.
			unreachable := make(chan struct{})
			var once sync.Once
			p := startGatewayWith(t, gatewaytest.Options{
				Args: []string{"--redis", redis, "--redis-timeout", "200ms"},
				OnLog: func(l []byte) {
					if bytes.Contains(l, []byte("redis backend unreachable")) {
						once.Do(func() { close(unreachable) })
					}
				},
			})
			select {
			case <-unreachable:
			case <-time.After(20 * time.Second):
				t.Fatalf("no log line says Redis is unreachable:\n%s", p.Log())
			}
			logs := p.Log()
			if strings.Contains(logs, "pw-s3cret-1") {
				t.Fatalf("the log shows the Redis password:\n%s", logs)
			}
			if !strings.Contains(logs, addr) {
				t.Fatalf("the log does not name the address, so it proves nothing:\n%s", logs)
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		code, stderr := runGateway(t, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--redis", "redis://roomcast:pw-s3cret-1@"+addr+"/nonsense")
		if code != 2 || strings.Contains(stderr, "pw-s3cret-1") || !strings.Contains(stderr, "127.0.0.1") {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
	})
}

func TestRedisCredentialsAuthenticate(t *testing.T) {
	s := redistest.Standalone(t)
	s.MustDo(t, "ACL", "SETUSER", "roomcast", "on", ">pw-s3cret-2", "~*", "&*", "+@all")
	s.MustDo(t, "ACL", "SETUSER", "default", "off")

	// A wrong password is a Redis that does not let the pod in: the pod runs,
	// refuses publishes with 503 and keeps trying, and never prints the password.
	wrong := startForLine(t, "--redis", "redis://roomcast:wrong-pw@"+s.Addr, "--redis-timeout", "500ms")
	res, err := http.Post(wrong.Public+"/rooms/r/events", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("publish with a wrong Redis password: %d, want 503", res.StatusCode)
	}
	if logs := wrong.Log(); strings.Contains(logs, "wrong-pw") || !strings.Contains(logs, "redis backend unreachable") {
		t.Fatalf("log of a pod with a wrong Redis password:\n%s", logs)
	}
	p := startForLine(t, "--redis", "redis://roomcast:pw-s3cret-2@"+s.Addr)
	if bytes.Contains(p.startLine, []byte("pw-s3cret-2")) || !bytes.Contains(p.startLine, []byte("redis://roomcast:xxxxx@"+s.Addr)) {
		t.Fatalf("start-up line: %s", p.startLine)
	}
	res, err = http.Post(p.Public+"/rooms/r/events", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("publish through the authenticated log: %d", res.StatusCode)
	}
}
