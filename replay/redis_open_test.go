package replay_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// openWarning is the start of the warning a log gives, once, when Redis takes
// commands from clients without credentials.
const openWarning = "redis takes commands from clients without credentials"

// checkedOpen opens a log on addrs with cfg, waits until it has found out whether
// Redis takes clients without credentials, and returns what it logged.
func checkedOpen(t *testing.T, addrs []string, cfg replay.RedisConfig) string {
	t.Helper()
	var logs replaytest.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	newRedisLog(t, addrs, cfg)
	replaytest.Eventually(t, 10*time.Second, "the check for clients without credentials", func() bool {
		s := logs.String()
		return strings.Contains(s, openWarning) || strings.Contains(s, "redis refuses")
	})
	return logs.String()
}

// TestRedisWarnsWhenOpen: a Redis whose default user is on without a password is
// named in one warning; one that asks for credentials (requirepass, or the
// documented ACL with the default user off) is not.
func TestRedisWarnsWhenOpen(t *testing.T) {
	t.Parallel()
	for name, addrs := range map[string][]string{
		"standalone": redistest.SharedStandalone(t).Addrs(),
		"cluster":    redistest.SharedCluster(t).Addrs(),
	} {
		logs := checkedOpen(t, addrs, replay.RedisConfig{})
		if n := strings.Count(logs, openWarning); n != 1 || !strings.Contains(logs, "level=WARN") {
			t.Errorf("%s without a password: %d warnings, want 1; logs:\n%s", name, n, logs)
		}
	}

	aclFile := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(aclFile, []byte("user default on >required-pw ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withPassword := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile})
	srv, acl := aclStandalone(t)
	for name, c := range map[string]struct {
		addrs []string
		cfg   replay.RedisConfig
	}{
		"requirepass":         {withPassword.Addrs(), replay.RedisConfig{Password: "required-pw"}},
		"documented ACL, off": {srv.Addrs(), acl},
	} {
		if logs := checkedOpen(t, c.addrs, c.cfg); strings.Contains(logs, openWarning) {
			t.Errorf("%s: warned that Redis takes clients without credentials:\n%s", name, logs)
		}
	}
	refusedNone(t, srv, "the check for clients without credentials")
}

// TestRedisOtherUsersCannotRingRooms: with the ACL deploy/README.md documents (the
// default user off, the gateway's user, an administrator without SPUBLISH), only
// the gateway's user can ring a room's doorbell.
func TestRedisOtherUsersCannotRingRooms(t *testing.T) {
	t.Parallel()
	const adminPassword = "admin-pw"
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	acl := documentedUser(t, "default", "", "") + "\n" +
		documentedACL(t, aclPassword) + "\n" +
		documentedUser(t, "admin", "admin-change-me", adminPassword) + "\n"
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile})
	channel := "room:{" + redistest.Prefix(t) + "}"
	if out, failed := cli(t, srv.Port, "roomcast", aclPassword, "SPUBLISH", channel, "x"); failed || out != "0" {
		t.Fatalf("the gateway's user: SPUBLISH %s = %q, want 0 receivers", channel, out)
	}
	if out, failed := cli(t, srv.Port, "admin", adminPassword, "SPUBLISH", channel, "x"); !failed || !strings.Contains(out, "NOPERM") {
		t.Fatalf("the administrator: SPUBLISH %s = %q, want NOPERM", channel, out)
	}
	if out, failed := cli(t, srv.Port, "admin", adminPassword, "SET", "other:key", "v"); failed || out != "OK" {
		t.Fatalf("the administrator keeps the rest: SET = %q", out)
	}
	if out, failed := cli(t, srv.Port, "", "", "SPUBLISH", channel, "x"); !failed || !strings.Contains(out, "NOAUTH") {
		t.Fatalf("a client without credentials: SPUBLISH %s = %q, want NOAUTH", channel, out)
	}
}
