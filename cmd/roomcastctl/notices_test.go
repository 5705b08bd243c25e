package main

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestErrorsPrintedOnce: a bad flag's error is printed once, with where to read the
// usage, before a command, after it, and for plan.
func TestErrorsPrintedOnce(t *testing.T) {
	c := newCtl(t)
	for _, args := range [][]string{{"--nope", "tail", "a"}, {"tail", "a", "--nope"}, {"plan", "--nope"}} {
		r := c.run("", args...)
		if r.code != exitUsage || strings.Count(r.errOut, "flag provided but not defined: -nope") != 1 ||
			strings.Count(r.errOut, "--help' for usage") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and the error once", args, r.code, r.errOut)
		}
	}
}

// TestCountForms: numbers come with the noun in the form they take.
func TestCountForms(t *testing.T) {
	for n, want := range map[int64]string{0: "0 rooms", 1: "1 room", 2: "2 rooms"} {
		if got := count(n, "room", "rooms"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
	a := &agreedAdmin{listBody: `{"pod":"pod-a","rooms":[{"room":"solo","members":1}],"total":1}`}
	srv := httptest.NewServer(a)
	defer srv.Close()
	r := newCtl(t, "ROOMCASTCTL_ADMIN_URL", srv.URL).run("", "rooms")
	if r.code != exitOK || !strings.HasPrefix(r.out, "pod pod-a: 1 room with local members\n") {
		t.Errorf("rooms: exit %d, out %q", r.code, r.out)
	}
}

// TestCommentTap: comment lines are found whatever pieces the stream comes in and
// whichever line ends it uses; fields and data are not comments.
func TestCommentTap(t *testing.T) {
	stream := ": hb\r\n\r\nid: 1\ndata: : not a comment\n\n:no space\r: the event log (redis at 127.0.0.1:6379) is unreachable\nretry: 4000\n\n"
	want := []string{"hb", "no space", "the event log (redis at 127.0.0.1:6379) is unreachable"}
	for size := 1; size <= len(stream); size++ {
		var got []string
		tap := &commentTap{emit: func(s string) { got = append(got, s) }, lineStart: true}
		for i := 0; i < len(stream); i += size {
			tap.feed([]byte(stream[i:min(i+size, len(stream))]))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pieces of %d: %q, want %q", size, got, want)
		}
	}
}

// TestTailSaysWhatTheServerSaid: against a pod whose Redis is unreachable, tail says
// it connected and what it does on a resync, then prints the server's reason for
// ending the stream (its comment line, which names Redis and the address) and that it
// reconnects.
func TestTailSaysWhatTheServerSaid(t *testing.T) {
	dead := deadURL(t)
	port := dead[strings.LastIndex(dead, ":")+1:]
	p := startPod(t, "--redis", "127.0.0.1:"+port, "--redis-timeout", "300ms", "--retry-min", "100ms", "--retry-max", "150ms")
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public)
	tail := c.start("tail", "news", "--from", "k3x9q2ab:4")
	want := []string{
		"roomcastctl tail: connected to news at " + p.Public + ", resuming after k3x9q2ab:4\n",
		"roomcastctl tail: a resync (the room's history lost or trimmed, as when an embedded gateway restarts) ends tail with exit code 1; --follow-resync keeps following\n",
		"roomcastctl tail: the server says: the event log (redis at 127.0.0.1:" + port + ") is unreachable; retry in a few seconds\n",
		"roomcastctl tail: the stream ended; reconnecting in ",
	}
	replaytest.Eventually(t, 20*time.Second, "tail told what the server said", func() bool {
		s := tail.errOut.String()
		at := 0
		for _, w := range want {
			i := strings.Index(s[at:], w)
			if i < 0 {
				return false
			}
			at += i + len(w)
		}
		return true
	})
	if strings.Count(tail.errOut.String(), "--follow-resync") != 1 {
		t.Errorf("the resync policy is said more than once:\n%s", tail.errOut.String())
	}
}

// TestTailSaysWhereItStarts: a tail without a resume point says where it starts (its
// stream's anchor) and that a resync ends it; with --follow-resync, that it follows
// on.
func TestTailSaysWhereItStarts(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public)
	r := c.run("", "publish", "lobby", `{"n":1}`)
	if r.code != exitOK {
		t.Fatalf("publish: exit %d, stderr %s", r.code, r.errOut)
	}
	id := strings.TrimSpace(r.out)
	for _, tc := range []struct {
		args   []string
		policy string
	}{
		{[]string{"tail", "lobby"}, "ends tail with exit code 1; --follow-resync keeps following"},
		{[]string{"tail", "lobby", "--follow-resync"}, "is printed and tail follows on (--follow-resync)"},
	} {
		tail := c.start(tc.args...)
		replaytest.Eventually(t, 20*time.Second, "tail said where it starts", func() bool {
			s := tail.errOut.String()
			return strings.Contains(s, "roomcastctl tail: connected to lobby at "+p.Public+", following from now (after "+id+")\n") &&
				strings.Contains(s, tc.policy)
		})
		tail.cancel()
		if code := tail.exit(t, 20*time.Second); code != exitOK {
			t.Fatalf("%v: exit %d", tc.args, code)
		}
	}
}
