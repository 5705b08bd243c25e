package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// bootFar is the largest UUIDv7: its timestamp is in the year 10889.
const bootFar = "ffffffff-ffff-7fff-bfff-ffffffffffff"

// captureLog returns a JSON logger for a pod, whose lines a test reads from buf
// (and that are searched for secrets, as every gateway log of the suite is).
func captureLog() (*slog.Logger, *replaytest.SyncBuffer) {
	buf := &replaytest.SyncBuffer{}
	w := io.MultiWriter(gatewaytest.LogWriter(), buf)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// logRecords returns the records of buf whose message is msg and whose attributes
// include every one of want (compared as their JSON text).
func logRecords(t testing.TB, buf *replaytest.SyncBuffer, msg string, want map[string]string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] != msg {
			continue
		}
		match := true
		for k, v := range want {
			if got, ok := rec[k]; !ok || fmt.Sprint(got) != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, rec)
		}
	}
	return out
}

// wantLogged fails t unless buf holds exactly one record with msg and want.
func wantLogged(t testing.TB, buf *replaytest.SyncBuffer, msg string, want map[string]string) {
	t.Helper()
	if got := logRecords(t, buf, msg, want); len(got) != 1 {
		t.Fatalf("%d log records %q with %v, want 1; the log:\n%s", len(got), msg, want, buf.String())
	}
}

// agentToken is a token for sub that reads public.* and the rooms of agents, with
// the roomcast claim's clients when clients is not nil.
func (p *securePod) agentToken(t testing.TB, sub string, clients []string) string {
	t.Helper()
	c := gatewaytest.UserClaims(sub, time.Hour, []string{"public.*", "agents.*"}, []string{"agents.*"})
	if clients != nil {
		c["roomcast"].(map[string]any)["clients"] = clients
	}
	c["aud"], c["iss"] = testAudience, testIssuer
	return p.keys.Sign(t, "ES256", c)
}

// TestWSClientIDAttackEmbedded is the attack on one pod: an agent holds its client
// id with a token for user-a; an anonymous connection names the same id with the
// largest UUIDv7 as its boot. The hello is refused (4400: a boot from the future),
// so is the same hello with a valid boot (4401: an anonymous connection may not
// claim an id outside anon:), and one from user-b with a newer boot (4403: the id is
// bound to user-a). The agent is never closed, keeps getting events, reconnects with
// its own boot, and every refusal is logged with both identities.
func TestWSClientIDAttackEmbedded(t *testing.T) {
	logger, logs := captureLog()
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{PodID: "pod-1", Logger: logger})
	rooms := map[string]string{"public.x": ""}
	boot := replay.NewBoot(time.Now())
	agent := dialWS(t, p.pod, "Authorization", "Bearer "+p.agentToken(t, "user-a", nil))
	w := agent.welcome("agent-a", boot, rooms)

	anon := dialWS(t, p.pod)
	anon.hello("agent-a", bootFar, rooms)
	anon.wantClose(4400)
	wantLogged(t, logs, "websocket client closed", map[string]string{
		"code": "4400", "client": "agent-a", "identity": "anonymous", "pod": "pod-1"})

	anon = dialWS(t, p.pod)
	anon.hello("agent-a", replay.NewBoot(time.Now()), rooms)
	anon.wantClose(4401)
	wantLogged(t, logs, "websocket client closed", map[string]string{
		"code": "4401", "client": "agent-a", "identity": "anonymous", "pod": "pod-1"})

	other := dialWS(t, p.pod, "Authorization", "Bearer "+p.agentToken(t, "user-b", nil))
	other.hello("agent-a", replay.NewBoot(time.Now()), rooms)
	other.wantClose(4403)
	wantLogged(t, logs, "websocket client closed", map[string]string{
		"code": "4403", "client": "agent-a", "identity": "sub:user-b", "owner_identity": "sub:user-a", "pod": "pod-1"})

	// The agent is still the owner, and still served.
	status, ci := p.client(t, "agent-a")
	if status != http.StatusOK || ci.Session != w.Session || ci.Identity != "sub:user-a" {
		t.Fatalf("the agent's entry: %d %+v", status, ci)
	}
	id := postAs(t, p, "public.x", `"still here"`)
	if m := agent.next(); m.Kind != "event" || m.ID != id {
		t.Fatalf("the agent got %+v, want event %s", m, id)
	}

	// The agent's own reconnect, with its boot, takes over from its old connection.
	again := dialWS(t, p.pod, "Authorization", "Bearer "+p.agentToken(t, "user-a", nil))
	again.welcome("agent-a", boot, rooms)
	agent.wantClose(4409)
	wantLogged(t, logs, "websocket client closed", map[string]string{
		"code": "4409", "client": "agent-a", "identity": "sub:user-a", "pod": "pod-1", "session": w.Session})
}

// TestWSClientIDRules: who may claim which client id, on a pod with a JWT key.
func TestWSClientIDRules(t *testing.T) {
	logger, logs := captureLog()
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{PodID: "pod-1", Logger: logger})
	rooms := map[string]string{"public.x": ""}
	now := replay.NewBoot(time.Now())
	cases := []struct {
		name    string
		token   string // "" for none
		client  string
		boot    string
		code    websocket.StatusCode // 0: welcomed
		logWant map[string]string
	}{
		{"AnonymousInItsNamespace", "", "anon:rig-1", now, 0, nil},
		{"AnonymousOutside", "", "rig-1", now, 4401, map[string]string{"client": "rig-1", "identity": "anonymous"}},
		{"TokenWithoutClientsClaim", p.agentToken(t, "u1", nil), "rig-2", now, 0, nil},
		{"TokenWithinItsClients", p.agentToken(t, "u2", []string{"agent-*"}), "agent-7", now, 0, nil},
		{"TokenOutsideItsClients", p.agentToken(t, "u3", []string{"agent-*"}), "rig-3", now, 4403, map[string]string{"client": "rig-3", "identity": "sub:u3"}},
		{"TokenWithNoClients", p.agentToken(t, "u4", []string{}), "rig-4", now, 4403, map[string]string{"client": "rig-4", "identity": "sub:u4"}},
		{"BootAMinuteAhead", p.agentToken(t, "u5", nil), "rig-5", replay.NewBoot(time.Now().Add(50 * time.Second)), 0, nil},
		{"BootTwoMinutesAhead", p.agentToken(t, "u6", nil), "rig-6", replay.NewBoot(time.Now().Add(2 * time.Minute)), 4400, map[string]string{"client": "rig-6", "identity": "sub:u6"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.token != "" {
				headers = []string{"Authorization", "Bearer " + tc.token}
			}
			c := dialWS(t, p.pod, headers...)
			if tc.code == 0 {
				c.welcome(tc.client, tc.boot, rooms)
				return
			}
			c.hello(tc.client, tc.boot, rooms)
			c.wantClose(tc.code)
			want := map[string]string{"code": fmt.Sprint(int(tc.code)), "pod": "pod-1"}
			for k, v := range tc.logWant {
				want[k] = v
			}
			wantLogged(t, logs, "websocket client closed", want)
		})
	}
}

// TestWSClosesAreLogged: every 4400, 4401, 4403 and 4409 close is logged once, with
// the connection's identity, client id, pod and reason (and never its token: the
// suite's logs are searched for every token it made).
func TestWSClosesAreLogged(t *testing.T) {
	logger, logs := captureLog()
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{PodID: "pod-log", Logger: logger})
	tok := p.agentToken(t, "ana", nil)
	bearer := []string{"Authorization", "Bearer " + tok}

	bad := dialWS(t, p.pod, bearer...)
	bad.hello("rig-bad", "not-a-boot", map[string]string{"public.x": ""})
	bad.wantClose(4400)
	anon := dialWS(t, p.pod)
	anon.hello("anon:rig", boot1, map[string]string{"private.x": ""})
	anon.wantClose(4401)
	forbidden := dialWS(t, p.pod, bearer...)
	forbidden.hello("rig-f", boot1, map[string]string{"private.x": ""})
	forbidden.wantClose(4403)
	first := dialWS(t, p.pod, bearer...)
	w := first.welcome("rig-1", boot1, map[string]string{"public.x": ""})
	second := dialWS(t, p.pod, bearer...)
	second.welcome("rig-1", bootNew, map[string]string{"public.x": ""})
	first.wantClose(4409)

	for _, want := range []map[string]string{
		{"code": "4400", "client": "rig-bad", "identity": "sub:ana", "reason": "bad hello: boot: a UUIDv7 in its canonical form"},
		{"code": "4401", "client": "anon:rig", "identity": "anonymous", "reason": "unauthorized: room private.x"},
		{"code": "4403", "client": "rig-f", "identity": "sub:ana", "reason": "forbidden: room private.x"},
		{"code": "4409", "client": "rig-1", "identity": "sub:ana", "session": w.Session, "reason": "superseded: the client connected again"},
	} {
		want["pod"] = "pod-log"
		wantLogged(t, logs, "websocket client closed", want)
	}
}

// TestWSClientIDOfAStaticKey: on a gateway without JWT keys, a connection that
// carries a static publish key claims as that key (key:1), so anonymous connections,
// which may claim any id there, cannot take its id.
func TestWSClientIDOfAStaticKey(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PublishToken: testStaticKey}})
	agent := dialWS(t, p, "Authorization", "Bearer "+testStaticKey)
	w := agent.welcome("agent-k", boot1, map[string]string{"a": ""})
	anon := dialWS(t, p)
	anon.hello("agent-k", bootNew, map[string]string{"a": ""})
	anon.wantClose(4403)
	if status, ci := p.client(t, "agent-k"); status != http.StatusOK || ci.Session != w.Session || ci.Identity != "key:1" {
		t.Fatalf("the entry: %d %+v", status, ci)
	}
	// The key's own reconnect takes over.
	again := dialWS(t, p, "Authorization", "Bearer "+testStaticKey)
	again.welcome("agent-k", boot1, map[string]string{"a": ""})
	agent.wantClose(4409)
}
