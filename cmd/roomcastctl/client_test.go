package main

import (
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestClientCloseModes: client --close --mode reconnect closes a ws connection with
// 1012, which ws takes as a reason to reconnect and resume; client --close (a kick,
// 4409) ends ws with exit code 1. client ID shows the connection and its agent.
func TestClientCloseModes(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	ws := c.start("ws", "orders", "--client", "ctl-op")
	replaytest.Eventually(t, 20*time.Second, "ws connected", func() bool { return connections(t, p) == 1 })

	shown := c.run("", "client", "ctl-op")
	if shown.code != exitOK || !strings.Contains(shown.out, "agent") || !strings.Contains(shown.out, "roomcastctl/") {
		t.Fatalf("client ctl-op: exit %d, out %q, stderr %q", shown.code, shown.out, shown.errOut)
	}

	r := c.run("", "client", "ctl-op", "--close", "--mode", "reconnect")
	if r.code != exitOK || !strings.Contains(r.out, "closed ctl-op (reconnect)") {
		t.Fatalf("close --mode reconnect: exit %d, out %q, stderr %q", r.code, r.out, r.errOut)
	}
	replaytest.Eventually(t, 20*time.Second, "ws reconnecting after 1012", func() bool {
		return strings.Contains(ws.errOut.String(), "the connection ended (1012)")
	})
	// It came back: a publish reaches it.
	replaytest.Eventually(t, 20*time.Second, "ws connected again", func() bool { return connections(t, p) == 1 })
	if pub := c.run("", "publish", "orders", `{"n":1}`); pub.code != exitOK {
		t.Fatalf("publish: exit %d, stderr %s", pub.code, pub.errOut)
	}
	if l := ws.line(t, 20*time.Second); !strings.Contains(l, `{"n":1}`) {
		t.Fatalf("ws printed %q", l)
	}

	if r := c.run("", "client", "ctl-op", "--close"); r.code != exitOK || !strings.Contains(r.out, "(kick)") {
		t.Fatalf("close: exit %d, out %q, stderr %q", r.code, r.out, r.errOut)
	}
	if code := ws.exit(t, 20*time.Second); code != exitFailed {
		t.Fatalf("ws exit %d after a kick, want %d; stderr %s", code, exitFailed, ws.errOut.String())
	}
}

// TestClientUsage: client takes one valid ID, and --mode only with --close and one
// of reconnect and kick.
func TestClientUsage(t *testing.T) {
	c := newCtl(t, "ROOMCASTCTL_ADMIN_URL", deadURL(t))
	for _, args := range [][]string{
		{"client"},
		{"client", "a", "b"},
		{"client", "bad id"},
		{"client", "a", "--mode", "reconnect"},
		{"client", "a", "--close", "--mode", "later"},
	} {
		if r := c.run("", args...); r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, r.code, exitUsage, r.errOut)
		}
	}
}
