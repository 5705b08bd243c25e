package redistest_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/roomcast/roomcast/replay/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(redistest.LeakOptions(),
		goleak.Cleanup(func(code int) { redistest.Teardown(); os.Exit(code) }))...)
}

func TestSlot(t *testing.T) {
	cases := []struct {
		key  string
		slot int
	}{
		{"foo", 12182},
		{"123456789", 12739},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"user1000", 3443},
		{"foo{}{bar}", 8363},
	}
	for _, tc := range cases {
		if got := redistest.Slot(tc.key); got != tc.slot {
			t.Errorf("Slot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

func TestPrefixIsARoomName(t *testing.T) {
	p := redistest.Prefix(t)
	if p == redistest.Prefix(t) {
		t.Fatal("two calls returned the same prefix")
	}
	for _, c := range p {
		if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-", c) {
			t.Fatalf("prefix %q has %q", p, c)
		}
	}
}

func TestStandalone(t *testing.T) {
	s := redistest.Standalone(t)
	if got := s.MustDo(t, "SET", "k", "v"); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	if _, err := s.Do("NOSUCHCOMMAND"); err == nil {
		t.Fatal("an error reply must be an error")
	}
	if len(s.Addrs()) != 1 || s.PID() <= 0 {
		t.Fatalf("addrs %v pid %d", s.Addrs(), s.PID())
	}
}

func TestCluster(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second})
	t.Logf("cluster ready in %s", time.Since(start))
	if len(c.Primaries(t)) != 3 || len(c.Addrs()) != 6 {
		t.Fatalf("%d primaries, %d addrs", len(c.Primaries(t)), len(c.Addrs()))
	}
	key := "room:{x}:seq"
	owner := c.NodeForKey(t, key)
	for _, k := range []string{key, "foo", "{}bar", "foo{}{bar}", "a{b}c{d}", "{{x}}"} {
		if got := owner.MustDo(t, "CLUSTER", "KEYSLOT", k); got != strconv.Itoa(redistest.Slot(k)) {
			t.Fatalf("CLUSTER KEYSLOT %q = %s, Slot = %d", k, got, redistest.Slot(k))
		}
	}
	owner.MustDo(t, "SET", key, "1")
	var to *redistest.Node
	for _, p := range c.Primaries(t) {
		if p != owner {
			to = p
			break
		}
	}
	start = time.Now()
	c.MigrateSlot(t, redistest.Slot(key), owner, to)
	t.Logf("migrated in %s", time.Since(start))
	if got := to.MustDo(t, "GET", key); got != "1" {
		t.Fatalf("after migration: %q", got)
	}
	rep := c.ReplicasOf(t, to)
	if len(rep) != 1 {
		t.Fatalf("%d replicas of %s", len(rep), to.Addr)
	}
	start = time.Now()
	c.Failover(t, rep[0])
	t.Logf("failover in %s", time.Since(start))
	if c.NodeForKey(t, key) != rep[0] {
		t.Fatal("failover did not move the slot")
	}
	start = time.Now()
	c.Kill(t, rep[0])
	t.Logf("kill and failover in %s", time.Since(start))
	if c.NodeForKey(t, key) != to {
		t.Fatal("kill did not fail over to the old primary")
	}
}
