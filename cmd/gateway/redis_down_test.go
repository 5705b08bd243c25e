package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestStartsWhileRedisIsDown: a pod started while its Redis is unreachable starts and
// is ready; streams get 200, a comment naming Redis and its address, a longer retry:
// and an end (never a status EventSource gives up on), publishes 503 naming them too,
// with Retry-After. When Redis comes up on that address
// the pod connects: publishes are 201 and streams receive them. /readyz stays 200
// throughout.
func TestStartsWhileRedisIsDown(t *testing.T) {
	redistest.Require(t)
	port := redistest.FreePort(t)
	p := startGateway(t, "--redis", "127.0.0.1:"+strconv.Itoa(port), "--redis-timeout", "300ms",
		"--retry-min", "1s", "--retry-max", "2s")
	ready := func() {
		t.Helper()
		res, err := http.Get(p.Public + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("readyz %d", res.StatusCode)
		}
	}
	ready()
	room := redistest.Prefix(t)
	res, err := http.Get(p.Public + "/rooms/" + room + "/events")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body) // the stream ends by itself
	res.Body.Close()
	// It says why, naming the backend and its address, then gives its retry hint.
	comment, retryLine, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	retry, _ := strconv.Atoi(strings.TrimPrefix(retryLine, "retry: "))
	if err != nil || res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") || retry < 2000 ||
		comment != ": the event log (redis at 127.0.0.1:"+strconv.Itoa(port)+") is unreachable; retry in a few seconds" {
		t.Fatalf("stream with redis down: %d %q %v, want 200, a comment naming redis and its address and one retry: of at least 2000ms", res.StatusCode, body, err)
	}
	publish := func() *http.Response {
		t.Helper()
		res, err := http.Post(p.Public+"/rooms/"+room+"/events", "application/json", strings.NewReader(`{"hello":1}`))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	pub := publish()
	msg, _ := io.ReadAll(pub.Body)
	pub.Body.Close()
	if pub.StatusCode != http.StatusServiceUnavailable || pub.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(msg), `"the event log (redis at 127.0.0.1:`+strconv.Itoa(port)+`) is unavailable: `) {
		t.Fatalf("publish with redis down: %d %s, Retry-After %q", pub.StatusCode, msg, pub.Header.Get("Retry-After"))
	}
	ready()

	redistest.StandaloneAt(t, port)
	replaytest.Eventually(t, 20*time.Second, "the backend up after redis started", func() error {
		res, err := http.Get(p.Admin + "/admin/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var st struct{ Backend struct{ Up bool } }
		if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
			return err
		}
		if !st.Backend.Up {
			return errors.New("backend down")
		}
		return nil
	})
	ready()
	res, err = http.Get(p.Public + "/rooms/" + room + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry: ") {
		t.Fatalf("stream with redis up: %q %v", line, err)
	}
	pub = publish()
	out, _ := io.ReadAll(pub.Body)
	pub.Body.Close()
	if pub.StatusCode != http.StatusCreated {
		t.Fatalf("publish with redis up: %d %s", pub.StatusCode, out)
	}
	dec := gatewaytest.NewDecoder(br, nil)
	for {
		ev, err := dec.Next()
		if err != nil {
			t.Fatalf("stream ended before the event: %v", err)
		}
		if ev.IsAnchor() {
			continue
		}
		if !strings.Contains(string(ev.Data), `"hello":1`) {
			t.Fatalf("event %q %q", ev.Type, ev.Data)
		}
		break
	}
}
