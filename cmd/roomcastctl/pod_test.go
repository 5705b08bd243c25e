package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// Tests against real gateway processes (gatewaytest.Build of ./cmd/gateway).

// connections reads the pod's open streams from /admin/stats.
func connections(t *testing.T, p *gatewaytest.Process) int64 {
	t.Helper()
	resp, err := http.Get(p.Admin + "/admin/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Connections int64 `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.Connections
}

// tailJSON is one line of tail --json.
func parseTail(t *testing.T, line string) tailLine {
	t.Helper()
	var l tailLine
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Fatalf("tail --json line %q: %v", line, err)
	}
	return l
}

// splitID splits "<epoch>:<seq>".
func splitID(t *testing.T, id string) ([]byte, uint64) {
	t.Helper()
	epoch, seq, ok := strings.Cut(id, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil {
		t.Fatalf("id %q is not <epoch>:<seq>", id)
	}
	return []byte(epoch), n
}

// TestTailReceivesPublishedInOrder: tail prints what publish published, in order,
// as lines people read and as JSON lines scripts parse.
func TestTailReceivesPublishedInOrder(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	human := c.start("tail", "news", "--count", "5")
	js := c.start("--json", "tail", "news", "--count", "5")
	replaytest.Eventually(t, 20*time.Second, "two tails connected", func() bool { return connections(t, p) == 2 })
	var ids []string
	for i := 1; i <= 5; i++ {
		args := []string{"publish", "news", fmt.Sprintf(`{"n":%d}`, i)}
		if i == 3 {
			args = []string{"publish", "news", "--type", "note", "--content-type", "text", "plain words"}
		}
		r := c.run("", args...)
		if r.code != exitOK {
			t.Fatalf("publish %d: exit %d, stderr %s", i, r.code, r.errOut)
		}
		ids = append(ids, strings.TrimSpace(r.out))
	}
	for i, id := range ids {
		want := fmt.Sprintf(`%s message {"n":%d}`, id, i+1)
		if i == 2 {
			want = id + ` note "plain words"`
		}
		if got := human.line(t, 20*time.Second); got != want {
			t.Errorf("tail line %d = %q, want %q", i, got, want)
		}
		l := parseTail(t, js.line(t, 20*time.Second))
		if l.Room != "news" || l.ID != id {
			t.Errorf("tail --json line %d = %+v, want room news, id %s", i, l, id)
		}
		if _, seq := splitID(t, l.ID); seq != uint64(i+1) {
			t.Errorf("seq %d, want %d", seq, i+1)
		}
	}
	if code := human.exit(t, 20*time.Second); code != exitOK {
		t.Errorf("tail --count 5 exit %d", code)
	}
	if code := js.exit(t, 20*time.Second); code != exitOK {
		t.Errorf("tail --json --count 5 exit %d", code)
	}
}

// TestTailResumesAcrossShed: the pod ends tail's stream (POST /admin/shed through
// roomcastctl shed) while events are published; tail comes back by itself, resumes
// from its last id and sees every event once, in order.
func TestTailResumesAcrossShed(t *testing.T) {
	p := startPod(t, "--retry-min", "100ms", "--retry-max", "150ms")
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	const rounds, perRound = 4, 40
	tail := c.start("--json", "tail", "orders")
	var tr gatewaytest.Tracker
	tr.ExpectFirst(1)
	tr.ResyncIsHead()
	seen := 0
	for round := range rounds {
		replaytest.Eventually(t, 20*time.Second, "tail connected", func() bool { return connections(t, p) == 1 })
		publishRoundWithShed(t, c, p, "orders", round, perRound)
		for seen < (round+1)*perRound {
			l := parseTail(t, tail.line(t, 20*time.Second))
			epoch, seq := splitID(t, l.ID)
			if l.Type != "message" {
				t.Fatalf("tail printed a %s: %+v", l.Type, l)
			}
			if v := tr.Observe(epoch, seq); v != gatewaytest.InOrder {
				t.Errorf("seq %d: %s", seq, v)
			}
			seen++
		}
	}
	if tr.Lossy() || tr.Last() != rounds*perRound {
		t.Errorf("tracker: last %d, gaps %d, duplicates %d, late %d, epoch changes %d",
			tr.Last(), tr.Gaps(), tr.Duplicates, tr.Late, tr.EpochChanges)
	}
	if n := strings.Count(tail.errOut.String(), "reconnecting"); n < rounds {
		t.Errorf("tail reconnected %d times, want at least %d; stderr:\n%s", n, rounds, tail.errOut.String())
	}
}

// TestTailResumesFromTheAnchor: tail's stream ends before its first event, and what
// is published while tail waits out the retry: hint reaches it: it resumes from the
// stream's anchor. The anchor itself is never printed.
func TestTailResumesFromTheAnchor(t *testing.T) {
	p := startPod(t, "--retry-min", "1s", "--retry-max", "1s")
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	if r := c.run("", "publish", "anchored", `{"n":0}`); r.code != exitOK {
		t.Fatalf("publish: exit %d, stderr %s", r.code, r.errOut)
	}
	tail := c.start("--json", "tail", "anchored")
	replaytest.Eventually(t, 20*time.Second, "tail connected", func() bool { return connections(t, p) == 1 })
	if r := c.run("", "shed", "1", "--json"); r.code != exitOK || strings.TrimSpace(r.out) != `{"closed":1}` {
		t.Fatalf("shed: exit %d, out %q, stderr %s", r.code, r.out, r.errOut)
	}
	var ids []string
	for i := 1; i <= 3; i++ {
		r := c.run("", "publish", "anchored", fmt.Sprintf(`{"n":%d}`, i))
		if r.code != exitOK {
			t.Fatalf("publish %d: exit %d, stderr %s", i, r.code, r.errOut)
		}
		ids = append(ids, strings.TrimSpace(r.out))
	}
	for _, id := range ids {
		if l := parseTail(t, tail.line(t, 20*time.Second)); l.ID != id || l.Type != "message" {
			t.Fatalf("tail printed %+v, want the message %s", l, id)
		}
	}
}

// TestPublishIdempotencyKey: the same key twice publishes once and prints the same
// id; another key publishes anew.
func TestPublishIdempotencyKey(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public)
	first := c.run("", "publish", "pay", `{"amount":5}`, "--idempotency-key", "order-991")
	again := c.run("", "publish", "pay", `{"amount":5}`, "--idempotency-key", "order-991")
	other := c.run("", "publish", "pay", `{"amount":5}`, "--idempotency-key", "order-992", "--json")
	for _, r := range []result{first, again, other} {
		if r.code != exitOK {
			t.Fatalf("publish: exit %d, stderr %s", r.code, r.errOut)
		}
	}
	if first.out != again.out || first.out == "" {
		t.Errorf("same key: ids %q and %q, want the same", first.out, again.out)
	}
	var ans published
	if err := json.Unmarshal([]byte(other.out), &ans); err != nil || ans.Room != "pay" || ans.Seq != 2 {
		t.Errorf("another key: --json %q (%v), want room pay, seq 2", other.out, err)
	}
	if ans.ID == strings.TrimSpace(first.out) {
		t.Errorf("another key got the first key's id %s", ans.ID)
	}
}

// TestExitCodes: what a real pod answers maps to the agreed exit codes, and the
// server's error code is shown.
func TestExitCodes(t *testing.T) {
	keys := gatewaytest.NewKeys(t)
	dir := t.TempDir()
	pubToken := gatewaytest.Secret("the static publish token", "pub-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-token")
	adminToken := gatewaytest.Secret("the admin token", "adm-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-token")
	adminFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(adminFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startPod(t, "--publish-token", pubToken, "--jwt-hmac-file", keys.HMACFile,
		"--admin-token-file", adminFile, "--max-rooms", "1")
	jwtA := keys.Sign(t, "HS256", gatewaytest.UserClaims("user-1", time.Hour, []string{"a"}, []string{"a"}))
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	c.secrets = append(c.secrets, pubToken, adminToken, jwtA)
	dead := deadURL(t)

	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string // in stderr
	}{
		{"published", []string{"publish", "a", "1", "--token", pubToken}, exitOK, ""},
		{"401 no token", []string{"publish", "a", "1"}, exitFailed, "401 unauthorized"},
		{"401 wrong token", []string{"publish", "a", "1", "--token", "not-the-token"}, exitFailed, "401 unauthorized"},
		{"403 not granted", []string{"publish", "b", "1", "--token", jwtA}, exitFailed, "403 forbidden"},
		{"404 wrong base URL", []string{"--url", p.Public + "/nope", "publish", "a", "1", "--token", pubToken}, exitFailed, "404 not_found"},
		{"503 no room left", []string{"publish", "c", "1", "--token", pubToken}, exitFailed, "503 unavailable"},
		{"400 bad type", []string{"publish", "a", "1", "--type", "resync", "--token", pubToken}, exitFailed, "400 invalid_type"},
		{"tail 401", []string{"tail", "a"}, exitFailed, "401 unauthorized"},
		{"tail 403", []string{"tail", "b", "--token", jwtA}, exitFailed, "403 forbidden"},
		{"admin 401", []string{"stats"}, exitFailed, "401 unauthorized"},
		{"admin token", []string{"stats", "--admin-token-file", adminFile}, exitOK, ""},
		{"publish unreachable", []string{"--url", dead, "publish", "a", "1"}, exitUnreachable, "no answer"},
		{"tail unreachable", []string{"--url", dead, "tail", "a"}, exitUnreachable, "no answer"},
		{"stats unreachable", []string{"--admin-url", dead, "stats"}, exitUnreachable, "no answer"},
		{"bad room", []string{"publish", "a{b}", "1"}, exitUsage, "invalid room name"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"bad flag", []string{"tail", "a", "--nope"}, exitUsage, "flag provided but not defined"},
		{"ticket without a token", []string{"ticket", "--sub", "u", "--room", "a"}, exitFailed, "401 unauthorized: a ticket is issued only on a credential that covers its rooms: pass the publish token"},
		{"shed not a number", []string{"shed", "many"}, exitUsage, "non-negative integer"},
		{"token and file", []string{"stats", "--admin-token", "x1234567", "--admin-token-file", adminFile}, exitUsage, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run("", tc.args...)
			if r.code != tc.code || !strings.Contains(r.errOut, tc.err) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.errOut, tc.code, tc.err)
			}
		})
	}
}

// TestAdminCommands: stats, shed and drain against a pod, human and --json.
func TestAdminCommands(t *testing.T) {
	p := startPod(t, "--drain-delay", "0s", "--drain-window", "100ms", "--retry-min", "100ms", "--retry-max", "150ms")
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	tail := c.start("tail", "lobby", "--json")
	replaytest.Eventually(t, 20*time.Second, "tail connected", func() bool { return connections(t, p) == 1 })

	r := c.run("", "stats")
	if r.code != exitOK || !strings.Contains(r.out, "state") || !regexp.MustCompile(`(?m)^connections +1 `).MatchString(r.out) {
		t.Errorf("stats: exit %d, out:\n%s\nstderr %s", r.code, r.out, r.errOut)
	}
	r = c.run("", "stats", "--json")
	var st struct {
		State       string `json:"state"`
		Connections int64  `json:"connections"`
	}
	if err := json.Unmarshal([]byte(r.out), &st); err != nil || st.State != "ready" || st.Connections != 1 {
		t.Errorf("stats --json: %q (%v)", r.out, err)
	}
	r = c.run("", "shed", "5")
	if r.code != exitOK || r.out != "closed 1 stream\n" {
		t.Errorf("shed: exit %d, out %q", r.code, r.out)
	}
	r = c.run("", "drain", "--json")
	var d struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(r.out), &d); err != nil || d.State != "draining" {
		t.Errorf("drain --json: exit %d, out %q (%v)", r.code, r.out, err)
	}
	if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
		t.Errorf("the pod after drain: exit %d, %v", code, err)
	}
	// The pod is gone: tail keeps trying (it had connected), and ends when told to.
	tail.cancel()
	if code := tail.exit(t, 20*time.Second); code != exitOK {
		t.Errorf("tail after its pod left: exit %d", code)
	}
}

// TestTicket: ticket asks POST /tickets with the publish credential, and the ticket
// it prints opens the room's stream once.
func TestTicket(t *testing.T) {
	pubToken := gatewaytest.Secret("the static publish token", "tk-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-pub")
	keys := gatewaytest.NewKeys(t)
	p := startPod(t, "--publish-token", pubToken, "--jwt-hmac-file", keys.HMACFile)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_TOKEN", pubToken)
	r := c.run("", "ticket", "--sub", "user-17", "--room", "chat-42", "--valid-for", "1h", "--json")
	var tk struct {
		Ticket    string `json:"ticket"`
		ExpiresAt string `json:"expiresAt"`
	}
	if err := json.Unmarshal([]byte(r.out), &tk); r.code != exitOK || err != nil || tk.Ticket == "" {
		t.Fatalf("ticket: exit %d, out %q, stderr %s (%v)", r.code, r.out, r.errOut, err)
	}
	gatewaytest.Secret("a ticket", tk.Ticket)
	resp, err := http.Get(p.Public + "/rooms/chat-42/events?ticket=" + tk.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("stream with the ticket: %s", resp.Status)
	}
	r = c.run("", "ticket", "--sub", "user-17", "--room", "chat-42", "--token", "wrong-token")
	if r.code != exitFailed || !strings.Contains(r.errOut, "401") {
		t.Errorf("ticket with a wrong credential: exit %d, stderr %q", r.code, r.errOut)
	}
	r = c.run("", "ticket", "--room", "chat-42")
	if r.code != exitUsage {
		t.Errorf("ticket without --sub: exit %d", r.code)
	}
}

// TestTailResync: a resume point from another history gets a resync, which tail
// prints and ends on with exit code 1, or follows on past with --follow-resync.
func TestTailResync(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public)
	for i := range 3 {
		if r := c.run("", "publish", "feed", strconv.Itoa(i)); r.code != exitOK {
			t.Fatalf("publish: exit %d, stderr %s", r.code, r.errOut)
		}
	}
	r := c.run("", "tail", "feed", "--from", "otherepoch:2")
	if r.code != exitFailed || !strings.Contains(r.out, " resync {") || !strings.Contains(r.errOut, "resync at") ||
		!strings.Contains(r.errOut, "an embedded gateway loses it when it restarts); --follow-resync keeps following past a resync") {
		t.Errorf("tail from another epoch: exit %d, out %q, stderr %q", r.code, r.out, r.errOut)
	}
	tail := c.start("tail", "feed", "--from", "otherepoch:2", "--follow-resync", "--json")
	l := parseTail(t, tail.line(t, 20*time.Second))
	if l.Type != "resync" {
		t.Fatalf("first line %+v, want the resync", l)
	}
	if r := c.run("", "publish", "feed", `"after"`); r.code != exitOK {
		t.Fatalf("publish: exit %d", r.code)
	}
	// The stream goes on from the resync's position: what the room holds after
	// it, then the new event.
	epoch, from := splitID(t, l.ID)
	for want := from + 1; want <= 4; want++ {
		l = parseTail(t, tail.line(t, 20*time.Second))
		e, seq := splitID(t, l.ID)
		if l.Type != "message" || string(e) != string(epoch) || seq != want {
			t.Fatalf("after the resync at %d: %+v, want seq %d", from, l, want)
		}
	}
	if string(l.Body) != `"after"` {
		t.Errorf("the last event's body %s, want \"after\"", l.Body)
	}
}

// TestTailReauth: a revoked credential ends tail's stream with a reauth, which tail
// reports; the reconnect is refused (401), and tail ends with exit code 1.
func TestTailReauth(t *testing.T) {
	keys := gatewaytest.NewKeys(t)
	p := startPod(t, "--jwt-hmac-file", keys.HMACFile, "--retry-min", "100ms", "--retry-max", "150ms")
	tok := keys.Sign(t, "HS256", gatewaytest.UserClaims("user-9", time.Hour, []string{"vip"}, nil))
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin, "ROOMCASTCTL_TOKEN", tok)
	tail := c.start("tail", "vip")
	replaytest.Eventually(t, 20*time.Second, "tail connected", func() bool { return connections(t, p) == 1 })
	resp, err := http.Post(p.Admin+"/admin/revoke", "application/json", strings.NewReader(`{"sub":"user-9"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %s", resp.Status)
	}
	if l := tail.line(t, 20*time.Second); !strings.Contains(l, " reauth {") {
		t.Errorf("tail line %q, want the reauth", l)
	}
	if code := tail.exit(t, 20*time.Second); code != exitFailed {
		t.Errorf("tail exit %d, want 1", code)
	}
	if s := tail.errOut.String(); !strings.Contains(s, "reauth") || !strings.Contains(s, "401 unauthorized") {
		t.Errorf("stderr %q", s)
	}
}

// publishRoundWithShed publishes perRound events to room over HTTP and has the pod
// shed its one stream half way through, so that the rest of the round reaches the
// follower from the log when it resumes.
func publishRoundWithShed(t *testing.T, c *ctl, p *gatewaytest.Process, room string, round, perRound int) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	for i := range perRound {
		resp, err := hc.Post(p.Public+"/rooms/"+room+"/events", "application/json", strings.NewReader(fmt.Sprintf(`{"round":%d,"i":%d}`, round, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("publish: %s", resp.Status)
		}
		if i == perRound/2 {
			if r := c.run("", "shed", "1", "--json"); r.code != exitOK || strings.TrimSpace(r.out) != `{"closed":1}` {
				t.Fatalf("shed: exit %d, out %q, stderr %s", r.code, r.out, r.errOut)
			}
		}
	}
}
