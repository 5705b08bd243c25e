package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// receiptAnswer is the answer to a publish that waited for a receipt.
type receiptAnswer struct {
	status int
	body   receiptFields
	raw    string
	took   time.Duration
	err    error
}

// receiptFields are the fields of a 201 or 202 with a receipt, and of GET
// /clients/{id}.
type receiptFields struct {
	Error              string `json:"error"`
	ID                 string `json:"id"`
	Client             string `json:"client"`
	AckedAt            string `json:"acked_at"`
	Connected          bool   `json:"connected"`
	Inbox              string `json:"inbox"`
	LastAck            string `json:"last_ack"`
	LastAckAt          string `json:"last_ack_at"`
	OldestUnackedAgeMS int64  `json:"oldest_unacked_age_ms"`
}

// publishWaiting posts body to room on base with Wait-For: waitFor (and headers,
// name, value pairs) in the background; the answer comes on the channel.
func publishWaiting(base, room, body, waitFor string, headers ...string) <-chan receiptAnswer {
	out := make(chan receiptAnswer, 1)
	go func() {
		start := time.Now()
		h := append([]string{"Content-Type", "application/json", "Wait-For", waitFor}, headers...)
		req, err := gatewaytest.NewRequest(context.Background(), http.MethodPost, base+"/rooms/"+room+"/events", strings.NewReader(body), h...)
		if err != nil {
			out <- receiptAnswer{err: err}
			return
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- receiptAnswer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		a := receiptAnswer{status: res.StatusCode, raw: string(b), took: time.Since(start), err: err}
		if err == nil {
			a.err = json.Unmarshal(b, &a.body)
		}
		out <- a
	}()
	return out
}

// answer waits for a waiting publish's answer.
func answer(t testing.TB, ch <-chan receiptAnswer) receiptAnswer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("publish with Wait-For: %v (%s)", a.err, a.raw)
		}
		return a
	case <-time.After(40 * time.Second):
		t.Fatal("no answer to a publish with Wait-For within 40s")
	}
	return receiptAnswer{}
}

// wantAcked checks a 201 with a receipt of event id by client.
func wantAcked(t testing.TB, a receiptAnswer, client string) {
	t.Helper()
	if a.status != http.StatusCreated || a.body.Client != client || a.body.ID == "" {
		t.Fatalf("answer %d %s; want 201 with the receipt of %s", a.status, a.raw, client)
	}
	if _, err := time.Parse(time.RFC3339Nano, a.body.AckedAt); err != nil {
		t.Fatalf("acked_at %q: %v", a.body.AckedAt, err)
	}
}

// ownerAcks reads the owner's next frame, an event of room, and acknowledges it.
func ownerAcks(t testing.TB, owner *wsClient, room string) string {
	t.Helper()
	m := owner.next()
	if m.Kind != wsclient.KindEvent || m.Room != room {
		t.Fatalf("the owner got %+v, want an event of %s", m, room)
	}
	owner.ack(room, m.ID)
	return m.ID
}

// twoPods starts pods <name>-a and <name>-b on the Redis Cluster, each serving its
// pod notices, and returns once both listen.
func twoPods(t *testing.T, name string) (*pod, *pod) {
	t.Helper()
	c := redistest.SharedCluster(t)
	pods := make([]*pod, 2)
	for i, id := range []string{name + "-a", name + "-b"} {
		pods[i] = newFleetPod(t, c, replay.RedisConfig{}, podConfig{gw: gateway.Config{PodID: id, OwnerTTL: time.Hour}})
		watchOwners(t, pods[i])
		replaytest.Eventually(t, 20*time.Second, id+"'s notice listener subscribed", func() bool {
			return podSubscribers(t, c, id) == 1
		})
	}
	return pods[0], pods[1]
}

// TestReceiptAcrossPods: two pods on the Redis Cluster; the client's connection is
// on pod B, a publish to its inbox with Wait-For hits pod A. The owner's ack on B
// answers A's publish with 201 long before its timeout (the receipt notice, not
// the final read), and A's GET /clients/{id} shows the ack once B has recorded it.
func TestReceiptAcrossPods(t *testing.T) {
	a, b := twoPods(t, "rcpt")
	client := redistest.Prefix(t) + "-rig"
	inbox := "inbox." + client
	owner := dialWS(t, b)
	owner.welcome(client, boot1, map[string]string{inbox: ""})

	pending := publishWaiting(a.public.URL, inbox, `{"n":1}`, "ack; timeout=20s")
	id := ownerAcks(t, owner, inbox)
	got := answer(t, pending)
	wantAcked(t, got, client)
	if got.body.ID != id || got.took >= 20*time.Second {
		t.Fatalf("answer %s after %v; want the receipt of %s before the timeout", got.raw, got.took, id)
	}

	replaytest.Eventually(t, 10*time.Second, "pod A's view of the ack", func() error {
		res := do(t, http.MethodGet, a.public.URL+"/clients/"+client, "")
		var st receiptFields
		if err := json.Unmarshal([]byte(res.body), &st); err != nil || res.status != http.StatusOK {
			return fmt.Errorf("GET /clients/%s: %d %s", client, res.status, res.body)
		}
		if !st.Connected || st.LastAck != id || st.LastAckAt == "" || st.Inbox != inbox || st.OldestUnackedAgeMS != 0 {
			return fmt.Errorf("status %s; want last_ack %s", res.body, id)
		}
		return nil
	})
}

// TestReceiptUnresponsive: a rig that stops acknowledging. A publish to its inbox
// that waits is answered 202 unresponsive with its last ack when its time is up;
// the event is published and delivered all the same. Over WebSocket, the published
// frame carries the same outcome.
func TestReceiptUnresponsive(t *testing.T) {
	p := newPod(t, podConfig{})
	const client = "rig-7"
	inbox := "inbox." + client
	owner := dialWS(t, p)
	owner.welcome(client, boot1, map[string]string{inbox: ""})

	pending := publishWaiting(p.public.URL, inbox, `{"n":1}`, "ack; timeout=20s")
	first := ownerAcks(t, owner, inbox)
	wantAcked(t, answer(t, pending), client)

	got := answer(t, publishWaiting(p.public.URL, inbox, `{"n":2}`, "ack; timeout=200ms"))
	st := got.body
	if got.status != http.StatusAccepted || st.Error != "unresponsive" || st.Client != client || !st.Connected ||
		st.LastAck != first || st.LastAckAt == "" || st.ID == "" || st.OldestUnackedAgeMS < 0 {
		t.Fatalf("answer %d %s; want 202 unresponsive with last_ack %s", got.status, got.raw, first)
	}
	if m := owner.next(); m.ID != st.ID {
		t.Fatalf("the owner got %+v, want the unacknowledged event %s", m, st.ID)
	}

	pub := dialWS(t, p)
	pub.welcome("publisher-1", boot1, map[string]string{"lobby": ""})
	pub.publish(wsclient.Publish{Room: inbox, Body: 3, Ref: "u", WaitFor: "ack", WaitTimeoutMS: 200})
	if m := pub.next(); m.Kind != wsclient.KindPublished || m.Ref != "u" || m.Receipt != "unresponsive" || m.Client != client ||
		!m.Connected || m.LastAck != first {
		t.Fatalf("WebSocket publish that waited: %+v; want unresponsive with last_ack %s", m, first)
	}
	owner.next() // the event just published
	pub.publish(wsclient.Publish{Room: inbox, Body: 4, Ref: "a", WaitFor: "ack", WaitTimeoutMS: 20000})
	id := ownerAcks(t, owner, inbox)
	if m := pub.next(); m.Kind != wsclient.KindPublished || m.Ref != "a" || m.Receipt != "acked" || m.ID != id || m.AckedAt == "" {
		t.Fatalf("WebSocket publish that waited: %+v; want the receipt of %s", m, id)
	}
}

// TestReceiptWaitRefused: a Wait-For the gateway cannot honour is refused before
// anything is published.
func TestReceiptWaitRefused(t *testing.T) {
	p := newPod(t, podConfig{})
	cases := []struct{ name, path, waitFor string }{
		{"NotAnInbox", "/rooms/orders/events", "ack"},
		{"NotAClient", "/rooms/inbox./events", "ack"},
		{"NotAck", "/rooms/inbox.rig/events", "delivery"},
		{"OverTheMax", "/rooms/inbox.rig/events", "ack; timeout=31s"},
		{"ZeroTimeout", "/rooms/inbox.rig/events", "ack; timeout=0s"},
		{"BadUnit", "/rooms/inbox.rig/events", "ack; timeout=5m"},
		{"OtherParameter", "/rooms/inbox.rig/events", "ack; for=5s"},
		{"Batch", "/events", "ack"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"n":1}`
			if tc.path == "/events" {
				body = `[{"room":"inbox.rig","body":1}]`
			}
			res := do(t, http.MethodPost, p.public.URL+tc.path, body, "Content-Type", "application/json", "Wait-For", tc.waitFor)
			if res.status != http.StatusBadRequest || !strings.Contains(res.body, `"invalid_wait"`) {
				t.Fatalf("%d %s; want 400 invalid_wait", res.status, res.body)
			}
		})
	}
	if evs, _, err := p.log.Since(context.Background(), "inbox.rig", replay.Position{}, 10); err != nil || len(evs) != 0 {
		t.Fatalf("inbox.rig holds %v (%v); want nothing published", evs, err)
	}
	c := dialWS(t, p)
	c.welcome("publisher-2", boot1, map[string]string{"lobby": ""})
	c.publish(wsclient.Publish{Room: "orders", Body: 1, Ref: "x", WaitFor: "ack"})
	if m := c.next(); m.Kind != wsclient.KindError || m.Error != "invalid_wait" || m.Ref != "x" {
		t.Fatalf("WebSocket publish to a room that is no inbox, waiting: %+v; want invalid_wait", m)
	}
	c.publish(wsclient.Publish{Room: "inbox.rig", Body: 1, Ref: "y", WaitFor: "ack", WaitTimeoutMS: 30001})
	if m := c.next(); m.Kind != wsclient.KindError || m.Error != "invalid_wait" || m.Ref != "y" {
		t.Fatalf("WebSocket publish waiting over the max: %+v; want invalid_wait", m)
	}
}

// TestReceiptWaitersBounded: with every place for a waiting publish taken, a
// publish with Wait-For is refused with 503 before it is published; once a place
// is free, it waits again.
func TestReceiptWaitersBounded(t *testing.T) {
	p := newPod(t, podConfig{})
	release := gateway.TakeReceiptWaiters(p.srv)
	res := do(t, http.MethodPost, p.public.URL+"/rooms/inbox.rig/events", `{"n":1}`, "Content-Type", "application/json", "Wait-For", "ack")
	if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") != "1" || !strings.Contains(res.body, `"unavailable"`) {
		t.Fatalf("%d %s; want 503 unavailable with Retry-After", res.status, res.body)
	}
	if evs, _, err := p.log.Since(context.Background(), "inbox.rig", replay.Position{}, 10); err != nil || len(evs) != 0 {
		t.Fatalf("inbox.rig holds %v (%v); want nothing published", evs, err)
	}
	release()
	if got := answer(t, publishWaiting(p.public.URL, "inbox.rig", `{"n":1}`, "ack; timeout=1ms")); got.status != http.StatusAccepted ||
		got.body.Connected || got.body.LastAck != "" {
		t.Fatalf("%d %s; want 202 for a client nobody owns", got.status, got.raw)
	}
}

// TestClientStatusRoute: GET /clients/{id} needs a credential that may publish to
// the client's inbox; it answers 400 for an id without an inbox, 404 for a client
// nobody owns, and the status of one that is connected.
func TestClientStatusRoute(t *testing.T) {
	keys := gatewaytest.NewKeys(t)
	p := newMemSecurePod(t, keys, gateway.Config{})
	claims := gatewaytest.UserClaims("rig", time.Hour, []string{"inbox.*"}, nil)
	claims["aud"], claims["iss"] = testAudience, testIssuer
	owner := dialWS(t, p.pod, "Authorization", "Bearer "+p.keys.Sign(t, "ES256", claims))
	owner.welcome("rig-9", boot1, map[string]string{"inbox.rig-9": ""})
	key := "Bearer " + testStaticKey

	cases := []struct {
		name, id, auth string
		status         int
		code           string
	}{
		{"NoCredential", "rig-9", "", http.StatusUnauthorized, "unauthorized"},
		{"NotGranted", "rig-9", "Bearer " + p.agentToken(t, "user-a", nil), http.StatusForbidden, "forbidden"},
		{"BadID", "rig%209", key, http.StatusBadRequest, "invalid_client"},
		{"NoInbox", "anon:rig", key, http.StatusBadRequest, "invalid_client"},
		{"Unknown", "rig-10", key, http.StatusNotFound, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			if tc.auth != "" {
				h = []string{"Authorization", tc.auth}
			}
			res := do(t, http.MethodGet, p.public.URL+"/clients/"+tc.id, "", h...)
			if res.status != tc.status || !strings.Contains(res.body, `"`+tc.code+`"`) {
				t.Fatalf("%d %s; want %d %s", res.status, res.body, tc.status, tc.code)
			}
		})
	}

	pending := publishWaiting(p.public.URL, "inbox.rig-9", `{"n":1}`, "ack", "Authorization", key)
	id := ownerAcks(t, owner, "inbox.rig-9")
	wantAcked(t, answer(t, pending), "rig-9")
	res := do(t, http.MethodGet, p.public.URL+"/clients/rig-9", "", "Authorization", key)
	var st receiptFields
	if err := json.Unmarshal([]byte(res.body), &st); err != nil || res.status != http.StatusOK || !st.Connected ||
		st.LastAck != id || st.LastAckAt == "" || st.Inbox != "inbox.rig-9" || st.OldestUnackedAgeMS != 0 {
		t.Fatalf("GET /clients/rig-9: %d %s; want connected, last_ack %s", res.status, res.body, id)
	}
}

// TestReceiptAcksCoalesced: a client that acknowledges n events as fast as they
// come costs Redis a write per flush interval (a second), not one per ack: the
// pod's ownership calls while it acks stay within the seconds it took, plus one
// for the last flush, one for the pod's notice subscription and one to spare. The
// last ack is recorded.
func TestReceiptAcksCoalesced(t *testing.T) {
	const n = 300
	s := redistest.SharedStandalone(t)
	p := newFleetPod(t, s, replay.RedisConfig{}, podConfig{gw: gateway.Config{PodID: "coalesce-a", OwnerTTL: time.Hour}})
	client := redistest.Prefix(t) + "-rig"
	inbox := "inbox." + client
	owner := dialWS(t, p)
	owner.welcome(client, boot1, map[string]string{inbox: ""})
	var calls atomic.Int64
	p.log.(*replay.RedisLog).ObserveCalls(func(op replay.RedisOp, _ time.Duration, _ error) {
		if op == replay.OpOwner {
			calls.Add(1)
		}
	})
	watchOwners(t, p)
	start := time.Now()
	items := make([]string, n)
	for i := range items {
		items[i] = `{"room":"` + inbox + `","body":1}`
	}
	if res := do(t, http.MethodPost, p.public.URL+"/events", "["+strings.Join(items, ",")+"]", "Content-Type", "application/json"); res.status != http.StatusOK {
		t.Fatalf("batch: %d %s", res.status, res.body)
	}
	var last string
	for range n {
		last = ownerAcks(t, owner, inbox)
	}
	// Read through another log, whose calls do not count.
	rl := newRedisLog(t, s)
	t.Cleanup(func() { _ = rl.Close(context.Background()) })
	reader := control(t, rl).Receipts
	replaytest.Eventually(t, 10*time.Second, "the last ack recorded", func() error {
		_, a, ok, err := reader.ClientAck(context.Background(), client, inbox)
		if err != nil || !ok || a.ID.String() != last {
			return fmt.Errorf("recorded ack %+v (%v, %v); want %s", a, ok, err, last)
		}
		return nil
	})
	took := time.Since(start)
	bound := int64(took/time.Second) + 3
	if got := calls.Load(); got > bound || got < 1 {
		t.Fatalf("%d acks in %v made %d ownership calls; want 1 to %d", n, took, got, bound)
	}
	t.Logf("%d acks in %v: %d ownership calls", n, took, calls.Load())
}
