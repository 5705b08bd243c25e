package replay_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// The ACL a pod needs is documented once, in deploy/README.md, as a line of an ACL
// file; these tests run Redis with exactly that line.
const aclDoc = "../deploy/README.md"

// documentedACL returns the ACL line for the gateway's user from deploy/README.md,
// with its placeholder password replaced by password.
func documentedACL(t *testing.T, password string) string {
	t.Helper()
	return documentedUser(t, "roomcast", "change-me", password)
}

// documentedUser returns the first ACL line for user in deploy/README.md, with its
// placeholder password (">placeholder", when given) replaced by password.
func documentedUser(t *testing.T, user, placeholder, password string) string {
	t.Helper()
	f, err := os.Open(aclDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "user "+user && !strings.HasPrefix(line, "user "+user+" ") {
			continue
		}
		if placeholder == "" {
			return line
		}
		if !strings.Contains(line, " >"+placeholder+" ") {
			t.Fatalf("%s: the ACL line of %s has no >%s placeholder: %s", aclDoc, user, placeholder, line)
		}
		return strings.Replace(line, " >"+placeholder+" ", " >"+password+" ", 1)
	}
	t.Fatalf("%s: no line starting with \"user %s \"", aclDoc, user)
	return ""
}

// The gateway user's password in the ACL tests, and that of the "inspector" user,
// which may read the ACL LOG.
const aclPassword, aclInspectorPassword = "acl-test-pw", "admin-test-pw"

// aclStandalone starts a standalone Redis whose default user is off and whose
// "roomcast" user holds exactly the documented ACL, and returns it with the
// gateway's configuration for that user.
func aclStandalone(t *testing.T) (*redistest.Server, replay.RedisConfig) {
	t.Helper()
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	acl := "user default off\n" +
		documentedACL(t, aclPassword) + "\n" +
		"user inspector on >" + aclInspectorPassword + " ~* &* +@all\n"
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile})
	return srv, replay.RedisConfig{Username: "roomcast", Password: aclPassword}
}

// aclCluster starts a 3-primary cluster whose nodes give the "roomcast" user exactly
// the documented ACL (the default user stays on: the cluster helpers need it), and
// returns it with the gateway's configuration for that user.
func aclCluster(t *testing.T) (*redistest.Cluster, replay.RedisConfig) {
	t.Helper()
	c := redistest.StartCluster(t, redistest.ClusterConfig{})
	line := documentedACL(t, aclPassword)
	args := append([]string{"ACL", "SETUSER"}, strings.Fields(strings.TrimPrefix(line, "user "))...)
	for _, n := range c.Nodes() {
		n.MustDo(t, args...)
		n.MustDo(t, "ACL", "LOG", "RESET")
	}
	return c, replay.RedisConfig{Username: "roomcast", Password: aclPassword}
}

// refusedNone fails t when srv refused any command (its ACL LOG is not empty); what
// names what sent them.
func refusedNone(t *testing.T, srv *redistest.Server, what string) {
	t.Helper()
	if out, _ := cli(t, srv.Port, "inspector", aclInspectorPassword, "ACL", "LOG"); out != "" {
		t.Fatalf("Redis refused commands %s sent (ACL LOG):\n%s", what, out)
	}
}

// clusterRefusedNone is refusedNone on every node of c.
func clusterRefusedNone(t *testing.T, c *redistest.Cluster, what string) {
	t.Helper()
	for _, n := range c.Nodes() {
		if out := n.MustDo(t, "ACL", "LOG"); out != "" {
			t.Errorf("node %s refused commands %s sent (ACL LOG):\n%s", n.Addr, what, out)
		}
	}
}

// cli runs redis-cli against 127.0.0.1:port as user and returns its output and
// whether Redis answered with an error.
func cli(t *testing.T, port int, user, password string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port), "--no-auth-warning", "-e"}, args...)
	if user != "" {
		full = append([]string{"--user", user, "--pass", password}, full...)
	}
	out, err := exec.CommandContext(ctx, "redis-cli", full...).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("redis-cli: %v", err)
	}
	return strings.TrimSpace(string(out)), err != nil
}

// exerciseLog runs everything a pod does through l: publish (loading the library
// happened at connect), replay, head, subscribe, tickets, revocations.
func exerciseLog(t *testing.T, l *replay.RedisLog) {
	t.Helper()
	ctl := controlOf(t, l)
	ctx := context.Background()
	room := redistest.Prefix(t) + ".acl"
	rec := subscribeRec(t, l, room)
	ev := mustAppend(t, l, room, msgN(1))
	if got := rec.next(t, 10*time.Second); got.Seq != ev.Seq {
		t.Fatalf("ring %+v, want seq %d", got, ev.Seq)
	}
	idem := msgN(2)
	idem.IdempotencyKey = "k1"
	mustAppend(t, l, room, idem)
	if evs, _, err := l.Since(ctx, room, replay.Position{}, 10); err != nil || len(evs) != 2 {
		t.Fatalf("since: %d events, %v", len(evs), err)
	}
	if _, err := l.Head(ctx, room); err != nil {
		t.Fatalf("head: %v", err)
	}
	if err := l.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	id := ticketID(t, "acl")
	if err := ctl.Tickets.PutTicket(ctx, id, []byte("v"), time.Minute); err != nil {
		t.Fatalf("put ticket: %v", err)
	}
	if v, err := ctl.Tickets.PeekTicket(ctx, id); err != nil || string(v) != "v" {
		t.Fatalf("peek ticket: %q, %v", v, err)
	}
	if v, err := ctl.Tickets.TakeTicket(ctx, id); err != nil || string(v) != "v" {
		t.Fatalf("take ticket: %q, %v", v, err)
	}
	ch := watch(t, accessControl(t, l))
	now := time.Now().Truncate(time.Millisecond)
	r := replay.Revocation{Kind: "sub", Value: room, At: now, Until: now.Add(time.Hour)}
	if err := ctl.Revocations.Revoke(ctx, r); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	await(t, ch, r)
	if err := l.Unsubscribe(ctx, room); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
}

// TestRedisACLStandalone: with the default user off and the gateway's user holding
// exactly the documented ACL, a log does all a pod does, Redis refused none of its
// commands (the ACL log stays empty), and a command outside the ACL is refused.
func TestRedisACLStandalone(t *testing.T) {
	t.Parallel()
	srv, cfg := aclStandalone(t)
	if out, refused := cli(t, srv.Port, "", "", "PING"); !refused || !strings.Contains(out, "NOAUTH") {
		t.Fatalf("the default user answered PING: %s", out)
	}
	l := newRedisLog(t, []string{srv.Addr}, cfg)
	exerciseLog(t, l)
	refusedNone(t, srv, "the log")
	for _, cmd := range [][]string{
		{"KEYS", "*"},
		{"SET", "other:key", "v"},
		{"SPUBLISH", "other", "v"},
		{"FLUSHALL"},
		{"CONFIG", "GET", "maxmemory"},
	} {
		if out, refused := cli(t, srv.Port, "roomcast", aclPassword, cmd...); !refused || !strings.Contains(out, "NOPERM") {
			t.Errorf("%v as roomcast: %q, want NOPERM", cmd, out)
		}
	}
}

// TestRedisACLCluster: on a 3-primary cluster whose nodes give the gateway's user
// exactly the documented ACL, a log does all a pod does and no node refused any of
// its commands. (The default user stays on here: the cluster helpers need it.)
func TestRedisACLCluster(t *testing.T) {
	t.Parallel()
	c, cfg := aclCluster(t)
	l := newRedisLog(t, c.Addrs(), cfg)
	exerciseLog(t, l)
	clusterRefusedNone(t, c, "the log")
	n := c.Nodes()[0]
	if out, refused := cli(t, n.Port, "roomcast", aclPassword, "KEYS", "*"); !refused || !strings.Contains(out, "NOPERM") {
		t.Errorf("KEYS as roomcast on the cluster: %q, want NOPERM", out)
	}
}
