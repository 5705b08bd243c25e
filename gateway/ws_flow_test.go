package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// clientInfo is GET /admin/clients/{id}.
type clientInfo struct {
	Client         string `json:"client"`
	Pod            string `json:"pod"`
	Boot           string `json:"boot"`
	Session        string `json:"session"`
	Identity       string `json:"identity"`
	Agent          string `json:"agent"`
	Local          bool   `json:"local"`
	ConnectedSince string `json:"connected_since"`
	Rooms          map[string]struct {
		Delivered      string `json:"delivered"`
		LastAck        string `json:"last_ack"`
		Unacknowledged int64  `json:"unacknowledged"`
	} `json:"rooms"`
	Unacknowledged int64  `json:"unacknowledged"`
	LastFrameAt    string `json:"last_frame_at"`
}

func (p *pod) client(t testing.TB, id string) (int, clientInfo) {
	t.Helper()
	res := do(t, http.MethodGet, p.admin.URL+"/admin/clients/"+id, "")
	var ci clientInfo
	if res.status == http.StatusOK {
		if err := json.Unmarshal([]byte(res.body), &ci); err != nil {
			t.Fatal(err)
		}
	}
	return res.status, ci
}

func TestWSAcksCountUnacknowledged(t *testing.T) {
	p := newPod(t, podConfig{})
	c := dialWS(t, p)
	c.welcome("acker", boot1, map[string]string{"a": "", "b": ""})
	var ids []string
	for i := range 3 {
		ids = append(ids, p.publish(t, "a", fmt.Sprint(i)))
	}
	p.publish(t, "b", `"b"`)
	for range 4 {
		c.next()
	}
	// The admin view is read after the client answered a ping sent after the
	// deliveries: the counts are settled by then.
	sync := func() {
		c.send(`{"v":1,"kind":"ping"}`)
		if m := c.next(); m.Kind != "pong" {
			t.Fatalf("want a pong, got %+v", m)
		}
	}
	sync()
	status, ci := p.client(t, "acker")
	if status != http.StatusOK || !ci.Local || ci.Unacknowledged != 4 || ci.Rooms["a"].Unacknowledged != 3 || ci.Rooms["a"].Delivered != ids[2] || ci.Rooms["a"].LastAck != "" {
		t.Fatalf("before acks: %d %+v", status, ci)
	}
	if ci.Boot != boot1 || ci.Session == "" || ci.Pod == "" || ci.ConnectedSince == "" || ci.LastFrameAt == "" {
		t.Fatalf("client info %+v", ci)
	}
	c.ack("a", ids[1])
	sync()
	_, ci = p.client(t, "acker")
	if ci.Rooms["a"].LastAck != ids[1] || ci.Rooms["a"].Unacknowledged != 1 || ci.Unacknowledged != 2 {
		t.Fatalf("after an ack of the second: %+v", ci)
	}
	// Acks of what was not delivered are refused and change nothing.
	epoch, _, _ := strings.Cut(ids[0], ":")
	for _, bad := range []map[string]any{
		{"v": 1, "kind": "ack", "room": "a", "id": epoch + ":9"},
		{"v": 1, "kind": "ack", "room": "zz", "id": ids[0]},
		{"v": 1, "kind": "ack", "room": "a", "id": "3"},
		// An epoch this connection was never delivered in the room.
		{"v": 1, "kind": "ack", "room": "a", "id": "zzzzzzzz:999999"},
		{"v": 1, "kind": "ack", "room": "a", "id": "zzzzzzzz:1"},
	} {
		c.send(bad)
		if m := c.next(); m.Kind != "error" || m.Error != "invalid_ack" {
			t.Fatalf("ack %v answered %+v", bad, m)
		}
	}
	c.ack("a", ids[2])
	c.send(map[string]any{"v": 1, "kind": "ack", "room": "b"})
	if m := c.next(); m.Kind != "error" || m.Error != "invalid_ack" {
		t.Fatalf("answer %+v", m)
	}
	sync()
	_, ci = p.client(t, "acker")
	if ci.Rooms["a"].LastAck != ids[2] || ci.Rooms["a"].Unacknowledged != 0 || ci.Unacknowledged != 1 {
		t.Fatalf("after acks: %+v", ci)
	}
	if status, _ := p.client(t, "nobody"); status != http.StatusNotFound {
		t.Fatalf("unknown client: %d", status)
	}
	if status, _ := p.client(t, "bad%20id"); status != http.StatusBadRequest {
		t.Fatalf("bad client id: %d", status)
	}
}

// A client that resumed from an epoch the room no longer has may still ack what it
// had of that epoch after the resync: that id was delivered to it. Past it, or in
// any other epoch, an ack is refused.
func TestWSLateAckAcrossAResyncIsAccepted(t *testing.T) {
	p := newPod(t, podConfig{})
	c := dialWS(t, p)
	c.welcome("late", boot1, map[string]string{"a": "oldepoch:5"})
	if m := c.next(); m.Kind != "resync" || m.Room != "a" {
		t.Fatalf("want a resync of a, got %+v", m)
	}
	for _, tc := range []struct {
		id string
		ok bool
	}{{"oldepoch:6", false}, {"otherepo:5", false}, {"oldepoch:5", true}, {"oldepoch:4", true}} {
		c.ack("a", tc.id)
		c.send(`{"v":1,"kind":"ping"}`)
		m := c.next()
		switch {
		case tc.ok && m.Kind != "pong":
			t.Fatalf("ack %s answered %+v, want it taken", tc.id, m)
		case !tc.ok && (m.Kind != "error" || m.Error != "invalid_ack"):
			t.Fatalf("ack %s answered %+v, want invalid_ack", tc.id, m)
		case !tc.ok:
			if m := c.next(); m.Kind != "pong" {
				t.Fatalf("want a pong, got %+v", m)
			}
		}
	}
	if _, ci := p.client(t, "late"); ci.Rooms["a"].LastAck != "oldepoch:4" {
		t.Fatalf("last ack %q, want oldepoch:4", ci.Rooms["a"].LastAck)
	}
}

func TestWSPublishUpstream(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxBody: 1 << 10}})
	sse := p.subscribe(t, "up", "")
	replaytest.Eventually(t, 10*time.Second, "stream joined", func() bool { return p.rooms.Len() == 1 })
	c := dialWS(t, p)
	c.welcome("pub", boot1, map[string]string{"other": ""})
	frames := []map[string]any{
		{"v": 1, "kind": "publish", "room": "up", "type": "order.created", "body": map[string]int{"n": 1}, "idempotency_key": "k-1", "ref": "r1"},
		{"v": 1, "kind": "publish", "room": "up", "type": "order.created", "body": map[string]int{"n": 1}, "idempotency_key": "k-1", "ref": "r2"},
		{"v": 1, "kind": "publish", "room": "bad room", "body": 1, "ref": "r3"},
		{"v": 1, "kind": "publish", "room": "up", "type": "resync", "body": 1, "ref": "r4"},
		{"v": 1, "kind": "publish", "room": "up", "body": strings.Repeat("x", 2<<10), "ref": "r5"},
		{"v": 1, "kind": "publish", "room": "up", "ref": "r6"},
		{"v": 1, "kind": "publish", "room": "up", "body": 1, "idempotency_key": "a b", "ref": "r7"},
		{"v": 1, "kind": "publish", "room": "up", "body": "text", "ref": "r8"},
	}
	for _, f := range frames {
		c.send(f)
	}
	want := []struct{ kind, err string }{
		{"published", ""}, {"published", ""}, {"error", "invalid_room"}, {"error", "invalid_type"},
		{"error", "payload_too_large"}, {"error", "invalid_body"}, {"error", "invalid_idempotency_key"}, {"published", ""},
	}
	var answers []wsMsg
	for i, w := range want {
		m := c.next()
		answers = append(answers, m)
		if m.Ref != fmt.Sprintf("r%d", i+1) || m.Kind != w.kind || m.Error != w.err {
			t.Fatalf("answer %d: %+v, want %s %s", i+1, m, w.kind, w.err)
		}
	}
	// The same key twice publishes once: the same id, and one event.
	if answers[0].ID == "" || answers[0].ID != answers[1].ID || answers[0].Room != "up" || answers[0].Seq != 1 {
		t.Fatalf("idempotent publishes: %+v and %+v", answers[0], answers[1])
	}
	if answers[7].Seq != 2 {
		t.Fatalf("third publish %+v, want seq 2", answers[7])
	}
	for _, seq := range []uint64{1, 2} {
		f := sse.next()
		if f.seq(t) != seq {
			t.Fatalf("SSE got %s, want seq %d", f.id, seq)
		}
		if seq == 1 && (f.event != "order.created" || !strings.Contains(f.data, `"body":{"n":1}`)) {
			t.Fatalf("SSE frame %+v", f)
		}
	}
}

// TestWSSlowConsumerIsClosedWith1013 holds one connection's writer while its room's
// queue overflows: it is closed with 1013 once released, and a connection that
// reads gets every event (resuming by id if it is ever dropped, as every client
// does).
func TestWSSlowConsumerIsClosedWith1013(t *testing.T) {
	const total = 40
	p := newPod(t, podConfig{queue: 4})
	hold := make(chan struct{})
	gateway.SetWSBatchHook(p.srv, func(client string) {
		if client == "stalled" {
			<-hold
		}
	})
	stalled := dialWS(t, p)
	stalled.welcome("stalled", boot1, map[string]string{"big": ""})
	reader := dialWS(t, p)
	reader.welcome("reader", boot1, map[string]string{"big": ""})
	for i := 1; i <= total; i++ {
		p.publish(t, "big", fmt.Sprint(i))
	}
	last, resumes := "", 0
	for i := 1; i <= total; {
		m, ok := <-reader.frames
		if !ok {
			if code, _, _ := reader.closeStatus(); code != 1013 {
				t.Fatalf("reader closed with %d", code)
			}
			resumes++
			reader = dialWS(t, p)
			reader.welcome("reader", boot1, map[string]string{"big": last})
			continue
		}
		if m.Kind != "event" || m.Seq != uint64(i) {
			t.Fatalf("reader: %+v, want seq %d", m, i)
		}
		last = m.ID
		i++
	}
	replaytest.Eventually(t, 10*time.Second, "stalled member closed", func() bool {
		return p.rooms.Stats().SlowDrops == uint64(resumes+1)
	})
	close(hold)
	stalled.wantClose(1013)
	if v := p.metrics(t).Value("roomcast_ws_closed_total", "code", "1013"); v != float64(resumes+1) {
		t.Fatalf("1013 closes counted: %v, want %d", v, resumes+1)
	}
	t.Logf("reader resumed %d times", resumes)
}

// TestWSSilentPeerIsClosed: a peer that neither answers pings nor sends anything is
// closed with 4408 once a ping goes unanswered for the pong timeout; a peer that
// answers pings stays.
func TestWSSilentPeerIsClosed(t *testing.T) {
	const ping, pong = 250 * time.Millisecond, 200 * time.Millisecond
	p := newPod(t, podConfig{gw: gateway.Config{WSPing: ping, WSPongTimeout: pong}})

	live := dialWS(t, p)
	live.welcome("live", boot1, map[string]string{"a": ""})

	c, _, err := dialWSRaw(t, p.public.URL, new(atomic.Int64))
	if err != nil {
		t.Fatal(err)
	}
	silent := (&wsClient{}).start(t, c, false)
	start := time.Now()
	silent.hello("silent", boot1, map[string]string{"a": ""})
	replaytest.Eventually(t, 10*time.Second, "silent peer closed", func() bool {
		return p.metrics(t).Value("roomcast_ws_closed_total", "code", "4408") == 1
	})
	took := time.Since(start)
	if took < pong {
		t.Fatalf("closed after %s, before a ping's pong timeout", took)
	}
	t.Logf("silent peer closed after %s (ping %s, pong timeout %s)", took, ping, pong)
	silent.startReading()
	frames := silent.wantClose(4408)
	if len(frames) == 0 || frames[0].Kind != "welcome" {
		t.Fatalf("frames %+v", frames)
	}

	// The peer that answers pings was pinged many times and is still served.
	replaytest.Eventually(t, 10*time.Second, "six pings answered", func() bool { return live.pings.Load() >= 6 })
	id := p.publish(t, "a", `1`)
	if m := live.next(); m.Kind != "event" || m.ID != id {
		t.Fatalf("live peer got %+v", m)
	}
}

// TestWSDrainCloses1012OnThePacedSchedule drains a pod with WebSocket and SSE
// members: every WebSocket connection is closed with 1012, by the drain's batches
// spread over its window, not all at once.
func TestWSDrainCloses1012OnThePacedSchedule(t *testing.T) {
	const n = 6
	p := newPod(t, podConfig{drain: drain.Config{Window: 1200 * time.Millisecond, Tick: 100 * time.Millisecond, Timeout: 10 * time.Second}})
	clients := make([]*wsClient, n)
	for i := range clients {
		clients[i] = dialWS(t, p)
		clients[i].welcome(fmt.Sprintf("d%d", i), boot1, map[string]string{fmt.Sprintf("room%d", i): ""})
	}
	sse := p.subscribe(t, "room0", "")
	replaytest.Eventually(t, 10*time.Second, "all joined", func() bool { return p.rooms.Len() == n+1 })
	p.drain.Start()
	ends := make([]time.Time, n)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			c.wantClose(1012)
			ends[i] = time.Now()
		})
	}
	wg.Wait()
	sse.waitEnd()
	first, last := ends[0], ends[0]
	for _, e := range ends {
		if e.Before(first) {
			first = e
		}
		if e.After(last) {
			last = e
		}
	}
	// 7 members over 12 ticks: one a tick, so the closes span several ticks.
	if last.Sub(first) < 300*time.Millisecond {
		t.Fatalf("closes spread over %s: not paced", last.Sub(first))
	}
	t.Logf("WebSocket closes spread over %s", last.Sub(first))
	if p.drain.Closed() < n {
		t.Fatalf("the drain counted %d closes", p.drain.Closed())
	}
}

// TestWSAndSSEGetTheSameEventsInTheSameOrder: SSE and WebSocket members of one room,
// with two publishers at once, receive the same events in the same order, each
// without loss.
func TestWSAndSSEGetTheSameEventsInTheSameOrder(t *testing.T) {
	const total = 300
	p := newPod(t, podConfig{history: total, queue: total * 2})
	sse := p.subscribe(t, "mix", "")
	ws := dialWS(t, p)
	ws.welcome("mixer", boot1, map[string]string{"mix": ""})
	replaytest.Eventually(t, 10*time.Second, "both joined", func() bool { return p.rooms.Len() == 2 })
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range total / 2 {
				p.publish(t, "mix", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
			}
		})
	}
	wg.Wait()
	var sseIDs, wsIDs []string
	var sseBodies, wsBodies []string
	tSSE, tWS := &gatewaytest.Tracker{}, &gatewaytest.Tracker{}
	for range total {
		f := sse.next()
		sseIDs = append(sseIDs, f.id)
		epoch, _, _ := strings.Cut(f.id, ":")
		if v := tSSE.Observe([]byte(epoch), f.seq(t)); v != gatewaytest.InOrder {
			t.Fatalf("SSE %s: %v", f.id, v)
		}
		var env struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal([]byte(f.data), &env); err != nil {
			t.Fatal(err)
		}
		sseBodies = append(sseBodies, string(env.Body))

		m := ws.next()
		wsIDs = append(wsIDs, m.ID)
		if v := tWS.Observe([]byte(m.Epoch), m.Seq); v != gatewaytest.InOrder {
			t.Fatalf("WebSocket %s: %v", m.ID, v)
		}
		wsBodies = append(wsBodies, string(m.Body))
	}
	if fmt.Sprint(sseIDs) != fmt.Sprint(wsIDs) || fmt.Sprint(sseBodies) != fmt.Sprint(wsBodies) {
		t.Fatal("SSE and WebSocket members saw different events or orders")
	}
	if tSSE.Lossy() || tWS.Lossy() {
		t.Fatal("a member lost events")
	}
}

// TestWSBusyRoomDoesNotStarveCloses: a connection whose room always has another
// batch waiting still takes a close between batches, long before its queue is empty.
func TestWSBusyRoomDoesNotStarveCloses(t *testing.T) {
	const total = 4000
	p := newPod(t, podConfig{queue: 2 * total, history: 10})
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	gateway.SetWSBatchHook(p.srv, func(client string) {
		if client == "busy" {
			once.Do(func() { held <- struct{}{}; <-hold })
		}
	})
	c := dialWS(t, p)
	c.welcome("busy", boot1, map[string]string{"busy": ""})
	<-held // the writer waits before its first batch
	marker := dialWS(t, p)
	marker.welcome("marker", boot1, map[string]string{"busy": ""})
	for i := range total {
		if _, err := p.log.Append(context.Background(), "busy", replay.Message{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// Once another member has every event, the held one has them queued too.
	for range total {
		if m := marker.next(); m.Kind != "event" {
			t.Fatalf("marker got %+v", m)
		}
	}
	if res := do(t, http.MethodPost, p.admin.URL+"/admin/clients/busy/close", ""); res.status != http.StatusOK {
		t.Fatalf("close: %d %s", res.status, res.body)
	}
	close(hold)
	frames := c.wantClose(4409)
	if len(frames) >= total {
		t.Fatalf("the close waited for all %d events", len(frames))
	}
	t.Logf("closed after %d of %d events", len(frames), total)
}

// An ack may reach the server before the write of the event it names has returned
// there: the writer is held right after its write until the ack has been served,
// and the ack must count.
func TestWSAckBeforeTheWriteReturnsIsAccepted(t *testing.T) {
	// On the goroutine path: on the loop the worker writes without blocking and
	// reads the acks itself, after its write has returned, so the order this test
	// forces cannot happen there.
	p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: gateway.IdleLoopOff}})
	wrote, release := holdOnce(t, "quick")
	gateway.SetWSWroteHook(p.srv, wrote.hook)
	// A room with history: the connection starts from a position of its epoch, so
	// an ack past what it was delivered is refused.
	p.publish(t, "a", `0`)
	c := dialWS(t, p)
	c.welcome("quick", boot1, map[string]string{"a": ""})
	id := p.publish(t, "a", `1`)
	if m := c.next(); m.Kind != "event" || m.ID != id {
		t.Fatalf("want event %s, got %+v", id, m)
	}
	c.ack("a", id)
	<-wrote.reached
	replaytest.Eventually(t, 10*time.Second, "the ack recorded while the writer is held after its write", func() bool {
		_, ci := p.client(t, "quick")
		return ci.Rooms["a"].LastAck == id
	})
	release()
	c.send(`{"v":1,"kind":"ping"}`)
	if m := c.next(); m.Kind != "pong" {
		t.Fatalf("after a valid ack, want the pong, got %+v", m)
	}
}

// A client that closes while the server has a batch of frames corked gets its close
// answered: the library writes the answer from its reading goroutine and closes the
// socket at once, and what was held must go out before it does.
func TestWSClientCloseDuringACorkedBatchIsAnswered(t *testing.T) {
	// On the goroutine path: the idle loop's corks nothing (a batch is one
	// writev).
	p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: gateway.IdleLoopOff}})
	ids := []string{p.publish(t, "a", `1`), p.publish(t, "a", `2`)}
	epoch, _, _ := strings.Cut(ids[0], ":")
	corked, release := holdOnce(t, "closer")
	gateway.SetWSCorkedHook(p.srv, corked.hook)
	c := dialWS(t, p)
	// The two events are replayed in one write batch, which the hook holds corked.
	c.welcome("closer", boot1, map[string]string{"a": epoch + ":0"})
	<-corked.reached
	closed := make(chan error, 1)
	go func() { closed <- c.c.Close(websocket.StatusNormalClosure, "done") }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("the client's close was not answered: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the client's close did not end")
	}
	release()
}

// held is a test hook that holds the first call for one client until released.
type held struct {
	client  string
	once    sync.Once
	reached chan struct{} // closed when the hook holds its call
	release chan struct{}
}

func (h *held) hook(client string) {
	if client == h.client {
		h.once.Do(func() {
			close(h.reached)
			<-h.release
		})
	}
}

// holdOnce makes a held hook for client and its release, which may be called more
// than once and is called when the test ends.
func holdOnce(t testing.TB, client string) (*held, func()) {
	h := &held{client: client, reached: make(chan struct{}), release: make(chan struct{})}
	var released sync.Once
	release := func() { released.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	return h, release
}
