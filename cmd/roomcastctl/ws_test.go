package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestWSReplaysThenFollows: ws resumes a room from an id over one WebSocket
// connection, prints the history after it, then live events, in order, and exits 0
// after --count.
func TestWSReplaysThenFollows(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	var ids []string
	publish := func(n int) {
		r := c.run("", "publish", "orders", fmt.Sprintf(`{"n":%d}`, n))
		if r.code != exitOK {
			t.Fatalf("publish %d: exit %d, stderr %s", n, r.code, r.errOut)
		}
		ids = append(ids, strings.TrimSpace(r.out))
	}
	for n := 1; n <= 3; n++ {
		publish(n)
	}
	ws := c.start("ws", "orders="+ids[0], "quiet", "--count", "4", "--client", "ctl-test")
	for i := 1; i < 3; i++ {
		if got, want := ws.line(t, 20*time.Second), fmt.Sprintf(`orders %s message {"n":%d}`, ids[i], i+1); got != want {
			t.Fatalf("replayed line %d = %q, want %q", i, got, want)
		}
	}
	publish(4)
	publish(5)
	for i := 3; i < 5; i++ {
		if got, want := ws.line(t, 20*time.Second), fmt.Sprintf(`orders %s message {"n":%d}`, ids[i], i+1); got != want {
			t.Fatalf("live line %d = %q, want %q", i, got, want)
		}
	}
	if code := ws.exit(t, 20*time.Second); code != exitOK {
		t.Fatalf("ws exit %d after --count, want 0", code)
	}
}

// TestWSResumesAcrossShed: a pod that sheds the connection half way through a burst
// (1012) gets it back, and every room goes on from its last id: no gap, no
// duplicate.
func TestWSResumesAcrossShed(t *testing.T) {
	p := startPod(t)
	c := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin)
	const rounds, perRound = 3, 30
	ws := c.start("--json", "ws", "feed", "--client", "ctl-shed")
	var tr gatewaytest.Tracker
	tr.ExpectFirst(1)
	seen := 0
	for round := range rounds {
		replaytest.Eventually(t, 20*time.Second, "ws connected", func() bool { return connections(t, p) == 1 })
		publishRoundWithShed(t, c, p, "feed", round, perRound)
		for seen < (round+1)*perRound {
			l := parseTail(t, ws.line(t, 20*time.Second))
			epoch, seq := splitID(t, l.ID)
			if l.Room != "feed" || l.Type != "message" {
				t.Fatalf("ws printed %+v", l)
			}
			if v := tr.Observe(epoch, seq); v != gatewaytest.InOrder {
				t.Errorf("seq %d: %s", seq, v)
			}
			seen++
		}
	}
	if tr.Lossy() || tr.Last() != rounds*perRound {
		t.Errorf("tracker: last %d, gaps %d, duplicates %d, late %d", tr.Last(), tr.Gaps(), tr.Duplicates, tr.Late)
	}
}

// TestWSDefaultClientID: without --client, ws names itself roomcastctl.<host>.<pid>
// (one id per process, so that two ws side by side do not take the connection from
// each other), in the anonymous namespace (anon:) when it has no credential, so that
// it is welcomed by a gateway with JWT keys both with and without a token.
func TestWSDefaultClientID(t *testing.T) {
	pubToken := gatewaytest.Secret("the static publish token", "tk-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-pub")
	keys := gatewaytest.NewKeys(t)
	p := startPod(t, "--publish-token", pubToken, "--jwt-hmac-file", keys.HMACFile, "--anonymous-rooms", "public.*")
	pub := newCtl(t, "ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_TOKEN", pubToken)
	tok := keys.Sign(t, "HS256", gatewaytest.UserClaims("user-9", time.Hour, []string{"public.*"}, nil))
	for name, env := range map[string][]string{
		"anonymous": {"ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin},
		"token":     {"ROOMCASTCTL_URL", p.Public, "ROOMCASTCTL_ADMIN_URL", p.Admin, "ROOMCASTCTL_TOKEN", tok},
	} {
		t.Run(name, func(t *testing.T) {
			room := "public." + name
			ws := newCtl(t, env...).start("ws", room, "--count", "1")
			replaytest.Eventually(t, 20*time.Second, "ws connected", func() bool { return connections(t, p) == 1 })
			if r := pub.run("", "publish", room, `"hi"`); r.code != exitOK {
				t.Fatalf("publish: exit %d, stderr %s", r.code, r.errOut)
			}
			if l := ws.line(t, 20*time.Second); !strings.HasPrefix(l, room+" ") || !strings.HasSuffix(l, ` message "hi"`) {
				t.Fatalf("ws printed %q", l)
			}
			if code := ws.exit(t, 20*time.Second); code != exitOK {
				t.Fatalf("ws exit %d, stderr %s", code, ws.errOut.String())
			}
			replaytest.Eventually(t, 20*time.Second, "ws gone", func() bool { return connections(t, p) == 0 })
		})
	}
	host, _ := os.Hostname()
	suffix := "roomcastctl." + sanitizeClient(host) + "." + strconv.Itoa(os.Getpid())
	if got, want := defaultClient(false), "anon:"+suffix; got != want || !replay.ValidClient(got) {
		t.Errorf("defaultClient(false) = %q, want %q", got, want)
	}
	if got := defaultClient(true); got != suffix || !replay.ValidClient(got) {
		t.Errorf("defaultClient(true) = %q, want %q", got, suffix)
	}
}

// TestWSTargetCarriesTheFirstRoom: the connection's URL names its first room, the
// key a router that hashes rooms routes /ws by.
func TestWSTargetCarriesTheFirstRoom(t *testing.T) {
	for _, c := range []struct{ base, first, want string }{
		{"http://gw:8080", "orders", "ws://gw:8080/ws?room=orders"},
		{"https://gw/", "orders=e1:5", "wss://gw/ws?room=orders"},
		{"http://gw", "a.b~c_d-e", "ws://gw/ws?room=a.b~c_d-e"},
	} {
		if got := wsTarget(c.base, c.first); got != c.want {
			t.Errorf("wsTarget(%q, %q) = %q, want %q", c.base, c.first, got, c.want)
		}
	}
}
