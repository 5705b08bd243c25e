package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// sampleEvery is the clients interval of these tests.
const sampleEvery = 50 * time.Millisecond

// TestParseClientList: only connections with the log's exact name and a
// subscription count; the largest omem and the summed tot-mem are theirs; lines and
// fields that do not parse are skipped.
func TestParseClientList(t *testing.T) {
	const name = "roomcast:pod-a"
	text := strings.Join([]string{
		"id=3 addr=127.0.0.1:1 name=roomcast:pod-a sub=0 psub=0 ssub=2 omem=100 tot-mem=2000 cmd=ssubscribe",
		"id=4 addr=127.0.0.1:2 name=roomcast:pod-a sub=0 psub=0 ssub=1 omem=700 tot-mem=3000 cmd=ssubscribe",
		"id=5 addr=127.0.0.1:3 name=roomcast:pod-a sub=0 psub=0 ssub=0 omem=900 tot-mem=9000 cmd=sunsubscribe",
		"id=6 addr=127.0.0.1:4 name=roomcast:pod-ab sub=0 psub=0 ssub=4 omem=5000 tot-mem=9000 cmd=ssubscribe",
		"id=7 addr=127.0.0.1:5 name=other sub=1 psub=0 ssub=0 omem=5000 tot-mem=9000 cmd=subscribe",
		"id=8 addr=127.0.0.1:6 name=roomcast:pod-a sub=x ssub=1 omem=-3 tot-mem=bad cmd=ssubscribe",
		"garbage name=roomcast:pod-a ",
		"",
	}, "\n")
	n, omem, mem := replay.ParseClientList(text, name)
	if n != 3 || omem != 700 || mem != 5000 {
		t.Fatalf("got %d connections, omem %d, tot-mem %d; want 3, 700, 5000", n, omem, mem)
	}
}

// clientsWhere polls l's samples, taken after the call, until ok holds.
func clientsWhere(t *testing.T, l *replay.RedisLog, within time.Duration, what string, ok func(replay.RedisClients) bool) replay.RedisClients {
	t.Helper()
	after := replay.ClientSamples(l)
	var got replay.RedisClients
	replaytest.Eventually(t, within, what, func() error {
		if replay.ClientSamples(l) <= after {
			return fmt.Errorf("no sample yet")
		}
		if got = l.Clients(); !ok(got) {
			return fmt.Errorf("last sample %+v", got)
		}
		return nil
	})
	return got
}

// TestRedisClientsStandalone, with the ACL deploy/README.md documents: the log
// names its connections "roomcast:<pod id>"; its sample counts its subscriber
// connections as Redis lists them; a stalled subscriber (its ring blocked, so
// nothing reads the connection) shows a growing output buffer; a server gone
// counts as down, and once it is back the subscriptions return and count as up.
func TestRedisClientsStandalone(t *testing.T) {
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	acl := "user default off\n" + documentedACL(t, aclPassword) + "\n" +
		"user inspector on >" + aclInspectorPassword + " ~* &* +@all\n"
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile})
	cfg := replay.RedisConfig{Username: "roomcast", Password: aclPassword}
	cfg.PodID, cfg.ClientsInterval, cfg.Timeout, cfg.History = "pod-a", sampleEvery, time.Second, 50
	l := newRedisLog(t, srv.Addrs(), cfg)
	clientsWhere(t, l, 5*time.Second, "a sample, nothing subscribed", func(c replay.RedisClients) bool {
		return c.Sampled && c.Up == 0 && c.Down == 0 && c.Nodes == 1
	})

	room := redistest.Prefix(t)
	stall := make(chan struct{})
	var (
		once    sync.Once
		stalled = make(chan struct{})
	)
	ring := func(ev replay.Event) {
		if ev.Seq == 0 {
			return
		}
		once.Do(func() { close(stalled) })
		<-stall
	}
	if err := l.Subscribe(context.Background(), room, ring); err != nil {
		t.Fatal(err)
	}
	before := clientsWhere(t, l, 5*time.Second, "the subscriber connection up", func(c replay.RedisClients) bool {
		return c.Sampled && c.Up >= 1 && c.Down == 0 && c.MaxOutputBuffer == 0
	})
	if out, _ := cli(t, srv.Port, "inspector", aclInspectorPassword, "CLIENT", "LIST", "TYPE", "pubsub"); !strings.Contains(out, " name=roomcast:pod-a ") {
		t.Fatalf("CLIENT LIST TYPE pubsub names no connection roomcast:pod-a:\n%s", out)
	}

	// Another pod publishes while this one's ring is stuck: Redis buffers.
	pub := newRedisLog(t, srv.Addrs(), replay.RedisConfig{Username: cfg.Username, Password: cfg.Password, PodID: "pod-b", History: 50})
	body := json.RawMessage(`"` + strings.Repeat("x", 32<<10) + `"`)
	// The publisher checks the last sample between events: the sampler needs no
	// help from the stalled connection.
	published := 0
	for {
		if c := l.Clients(); c.MaxOutputBuffer > 0 {
			t.Logf("after %d events of 32 KiB: output buffer %d bytes, memory %d bytes (before: %d)", published, c.MaxOutputBuffer, c.Memory, before.Memory)
			if c.Memory <= before.Memory {
				t.Errorf("memory %d, not above %d before the stall", c.Memory, before.Memory)
			}
			break
		}
		if published%64 == 63 {
			// A sample between batches bounds what piles up unseen.
			n := replay.ClientSamples(l)
			replaytest.Eventually(t, 5*time.Second, "a sample", func() bool { return replay.ClientSamples(l) > n })
		}
		if published > 5000 {
			t.Fatal("5000 events published, and the output buffer stays empty")
		}
		if _, err := pub.Append(context.Background(), room, replay.Message{Body: body}); err != nil {
			t.Fatal(err)
		}
		published++
	}
	<-stalled
	close(stall)
	clientsWhere(t, l, 10*time.Second, "the output buffer drained", func(c replay.RedisClients) bool {
		return c.Up >= 1 && c.MaxOutputBuffer == 0
	})

	// The server goes away: its node counts as down, until it is back.
	port := srv.Port
	if err := syscall.Kill(srv.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	clientsWhere(t, l, 10*time.Second, "the server down", func(c replay.RedisClients) bool {
		return c.Sampled && c.Up == 0 && c.Down == 1 && c.Nodes == 0
	})
	resubscribes := l.Stats().Resubscribes
	back := redistest.StandaloneAtWith(t, port, redistest.Options{ACLFile: aclFile})
	clientsWhere(t, l, 15*time.Second, "the subscriber connection up again", func(c replay.RedisClients) bool {
		return c.Up >= 1 && c.Down == 0
	})
	if got := l.Stats().Resubscribes; got <= resubscribes {
		t.Errorf("resubscribes %d, want more than %d", got, resubscribes)
	}
	refusedNone(t, back, "the pod, sampling its connections")
}

// TestRedisClientsRefused: a user without CLIENT LIST gets one warning and no
// sample; everything else works.
func TestRedisClientsRefused(t *testing.T) {
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	line := documentedACL(t, aclPassword)
	if !strings.Contains(line, " +client|list") {
		t.Fatalf("the documented ACL does not grant CLIENT LIST: %s", line)
	}
	acl := "user default off\n" + strings.Replace(line, " +client|list", "", 1) + "\n"
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile})
	var logs replaytest.SyncBuffer
	l := newRedisLog(t, srv.Addrs(), replay.RedisConfig{
		Username: "roomcast", Password: aclPassword, PodID: "pod-a", ClientsInterval: sampleEvery,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	room := redistest.Prefix(t)
	if err := l.Subscribe(context.Background(), room, func(replay.Event) {}); err != nil {
		t.Fatal(err)
	}
	const warning = "redis refuses CLIENT LIST"
	replaytest.Eventually(t, 5*time.Second, "the warning", func() bool { return strings.Contains(logs.String(), warning) })
	first := replay.ClientSamples(l)
	replaytest.Eventually(t, 5*time.Second, "three more samples", func() bool { return replay.ClientSamples(l) >= first+3 })
	if c := l.Clients(); c.Sampled || c.Up != 0 || c.Down != 0 {
		t.Errorf("refused, and yet a sample: %+v", c)
	}
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if _, err := l.Append(context.Background(), room, replay.Message{Body: json.RawMessage(`1`)}); err != nil {
		t.Errorf("publish without CLIENT LIST: %v", err)
	}
}

// TestRedisClientsCluster: on a 3+3 cluster the log holds one subscriber
// connection per primary that serves a subscribed room; a killed primary counts as
// down until its replica took over and the subscriptions moved there.
func TestRedisClientsCluster(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second})
	l := newRedisLog(t, c.Addrs(), replay.RedisConfig{PodID: "pod-a", ClientsInterval: sampleEvery, Timeout: time.Second})
	primaries := c.Primaries(t)
	// One room on each primary.
	rooms := map[string]*redistest.Node{}
	prefix := redistest.Prefix(t)
	for i := 0; len(rooms) < len(primaries) && i < 10000; i++ {
		room := fmt.Sprintf("%s-%d", prefix, i)
		n := c.NodeForKey(t, "room:{"+room+"}")
		seen := false
		for _, m := range rooms {
			seen = seen || m == n
		}
		if !seen {
			rooms[room] = n
		}
	}
	var victim string
	for room := range rooms {
		if err := l.Subscribe(context.Background(), room, func(replay.Event) {}); err != nil {
			t.Fatal(err)
		}
		victim = room
	}
	clientsWhere(t, l, 10*time.Second, "one subscriber connection per primary", func(s replay.RedisClients) bool {
		return s.Sampled && s.Up == len(primaries) && s.Down == 0
	})
	resubscribes := l.Stats().Resubscribes
	c.KillNoWait(t, rooms[victim])
	clientsWhere(t, l, 10*time.Second, "the killed primary down", func(s replay.RedisClients) bool {
		return s.Down == 1 && s.Up == len(primaries)-1
	})
	c.WaitOK(t)
	clientsWhere(t, l, 30*time.Second, "the subscriptions on the promoted replica", func(s replay.RedisClients) bool {
		return s.Up == len(primaries) && s.Down == 0
	})
	if got := l.Stats().Resubscribes; got <= resubscribes {
		t.Errorf("resubscribes %d, want more than %d", got, resubscribes)
	}
}
