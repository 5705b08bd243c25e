package main

import (
	"strings"
	"testing"
	"time"
)

// TestExpiredPrinted: an event published with --ttl and read after its time to
// live comes as an expired marker, which tail and ws print as such (no body; null
// with --json) between the events around it, and count like events.
func TestExpiredPrinted(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public)
	publish := func(args ...string) string {
		t.Helper()
		r := c.run("", append([]string{"publish", "rig-0414"}, args...)...)
		if r.code != exitOK {
			t.Fatalf("publish %q: exit %d, stderr %s", args, r.code, r.errOut)
		}
		return strings.TrimSpace(r.out)
	}
	first := publish(`{"n":1}`)
	cmd := publish("--type", "command", "--ttl", "1ms", `"reboot"`)
	// The deadline is at most 1ms after the answer: wait for the clock to pass it.
	time.Sleep(2 * time.Millisecond)
	last := publish(`{"n":3}`)

	r := c.run("", "tail", "rig-0414", "--from", first, "--count", "2", "--type", "message")
	want := cmd + " expired (its time to live passed before it was delivered: no body)\n" + last + ` message {"n":3}` + "\n"
	if r.code != exitOK || r.out != want {
		t.Fatalf("tail: exit %d, out %q, want %q; stderr %s", r.code, r.out, want, r.errOut)
	}
	r = c.run("", "tail", "rig-0414", "--from", first, "--count", "1", "--json")
	if l := parseTail(t, strings.TrimSpace(r.out)); r.code != exitOK || l.Type != "expired" || l.ID != cmd || string(l.Body) != "null" {
		t.Fatalf("tail --json: exit %d, line %+v", r.code, l)
	}
	r = c.run("", "ws", "rig-0414="+first, "--count", "2", "--client", "ctl-expired")
	want = "rig-0414 " + cmd + " expired (its time to live passed before it was delivered: no body)\n" +
		"rig-0414 " + last + ` message {"n":3}` + "\n"
	if r.code != exitOK || !strings.HasSuffix(r.out, want) {
		t.Fatalf("ws: exit %d, out %q, want it to end with %q; stderr %s", r.code, r.out, want, r.errOut)
	}
}
