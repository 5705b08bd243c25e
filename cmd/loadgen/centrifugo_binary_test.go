package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestRealCentrifugoRecovers runs loadgen against a real Centrifugo (the binary
// .ci/centrifugo builds; set ROOMCAST_CENTRIFUGO to its path, else the test skips,
// or fails under CI=true):
// one subscriber is disconnected by the server API while events are published, and
// must come back, recover what it missed from the channel's history, and see every
// event exactly once.
func TestRealCentrifugoRecovers(t *testing.T) {
	bin := os.Getenv("ROOMCAST_CENTRIFUGO")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("ROOMCAST_CENTRIFUGO is not set: CI=true requires this test to run (.ci/run builds the binary with .ci/centrifugo)")
		}
		t.Skip("ROOMCAST_CENTRIFUGO is not set (ROOMCAST_CENTRIFUGO=$(bash .ci/centrifugo) builds it)")
	}
	dir := t.TempDir()
	port := redistest.FreePort(t)
	const key, secret = "test-api-key", "test-token-secret"
	config := fmt.Sprintf(`{
  "http_server": {"address": "127.0.0.1", "port": %d},
  "log": {"level": "error"},
  "usage_stats": {"disabled": true},
  "health": {"enabled": true},
  "client": {"token": {"hmac_secret_key": %q}},
  "http_api": {"key": %q, "error_mode": "transport"},
  "uni_sse": {"enabled": true},
  "channel": {"without_namespace": {"history_size": 1000, "history_ttl": "1h", "force_recovery": true}}
}`, port, secret, key)
	for name, content := range map[string]string{"config.json": config, "key": key, "secret": secret} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logFile, err := os.Create(filepath.Join(dir, "centrifugo.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "config.json"))
	cmd.Stdout, cmd.Stderr = logFile, logFile // the child writes the file itself
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	api := func(method, body string) (string, error) {
		req, err := http.NewRequest(http.MethodPost, base+"/api/"+method, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: status %d: %s", method, resp.StatusCode, b)
		}
		return string(b), err
	}
	replaytest.Eventually(t, 30*time.Second, "centrifugo answers its API", func() error {
		_, err := api("info", "{}")
		return err
	})

	cfg, err := parseFlags([]string{"-url", base, "-protocol", "centrifugo",
		"-api-key-file", filepath.Join(dir, "key"), "-token-secret-file", filepath.Join(dir, "secret"),
		"-subs", "2", "-rooms", "1", "-rate", "100", "-max-events", "500", "-duration", "60s",
		"-warmup", "0s", "-settle", "30s", "-retry-cap", "50ms", "-progress", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := run(t.Context(), cfg, io.Discard)
		done <- result{rep, err}
	}()
	replaytest.Eventually(t, 30*time.Second, "both subscribers connected", func() error {
		info, err := api("info", "{}")
		if err == nil && !strings.Contains(info, `"num_clients":2`) {
			err = fmt.Errorf("info: %s", info)
		}
		return err
	})
	if _, err := api("disconnect", `{"user":"load0"}`); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	rep := res.rep
	var b bytes.Buffer
	_ = rep.WriteTable(&b)
	if rep.Lossy() || rep.Resyncs != 0 || rep.Reconnects < 1 || rep.PublishErrors != 0 || rep.Published != 500 ||
		rep.Deliveries != 2*500 {
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("want 500 events to both subscribers, one reconnect recovered:\n%s\ncentrifugo log:\n%s", b.String(), log)
	}
}
