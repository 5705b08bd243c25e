package gateway_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(redistest.LeakOptions(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.Cleanup(func(code int) {
			redistest.Teardown()
			removeGatewayBinary()
			os.Exit(gatewaytest.RedactionMain(func() int { return code }))
		}))...)
}

func TestStreamHeadersAndFirstFrame(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{RetryMin: 3 * time.Second, RetryMax: 6 * time.Second}})
	seen := map[int]bool{}
	for i := 0; i < 20; i++ {
		s := p.subscribe(t, "42", "")
		h := s.res.Header
		if s.res.StatusCode != http.StatusOK ||
			h.Get("Content-Type") != "text/event-stream; charset=utf-8" ||
			h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
			t.Fatalf("status %d, headers %v", s.res.StatusCode, h)
		}
		f, _ := s.nextAny()
		if f.retry < 3000 || f.retry > 6000 || f.hasID || f.data != "" {
			t.Fatalf("first frame %+v, want only retry: in [3000, 6000]", f)
		}
		seen[f.retry] = true
		s.close()
	}
	if len(seen) < 5 {
		t.Fatalf("retry: drawn from only %d values in 20 connections: not jittered", len(seen))
	}
}

func TestStreamRejectsWhatCanNeverSucceed(t *testing.T) {
	p := newPod(t, podConfig{})
	cases := []struct {
		name, path string
		headers    []string
		code       string
	}{
		{"brace in room", "/rooms/a%7Bb%7D/events", nil, "invalid_room"},
		{"room too long", "/rooms/" + strings.Repeat("r", 129) + "/events", nil, "invalid_room"},
		{"space in room", "/rooms/a%20b/events", nil, "invalid_room"},
		{"malformed header id", "/rooms/ok/events", []string{"Last-Event-ID", "x:y"}, "invalid_last_event_id"},
		{"malformed query id", "/rooms/ok/events?lastEventId=-3", nil, "invalid_last_event_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, http.MethodGet, p.public.URL+tc.path, "", tc.headers...)
			assertError(t, res, http.StatusBadRequest, tc.code)
		})
	}
}

func assertError(t *testing.T, res response, status int, code string) {
	t.Helper()
	var body struct{ Error, Message string }
	if err := json.Unmarshal([]byte(res.body), &body); err != nil || res.status != status || body.Error != code || body.Message == "" {
		t.Fatalf("got %d %q, want %d with error %q and a message", res.status, res.body, status, code)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error content type %q", ct)
	}
}

func TestEventFrames(t *testing.T) {
	p := newPod(t, podConfig{})
	s := p.subscribe(t, "chat.1", "")
	s.nextAny() // retry
	p.publish(t, "chat.1", `{ "text" : "hi",
		"n": 1 }`)
	do(t, http.MethodPost, p.public.URL+"/rooms/chat.1/events", "plain words", "Content-Type", "text/plain; charset=utf-8", "Event-Type", "note")
	do(t, http.MethodPost, p.public.URL+"/rooms/chat.1/events?type=alert", `[1,2]`, "Content-Type", "application/json")

	type envelope struct {
		Room  string          `json:"room"`
		Epoch string          `json:"epoch"`
		Seq   uint64          `json:"seq"`
		TS    int64           `json:"ts"`
		Type  string          `json:"type"`
		Body  json.RawMessage `json:"body"`
	}
	want := []struct {
		event, typ, body string
	}{
		{"", "message", `{"text":"hi","n":1}`},
		{"note", "note", `"plain words"`},
		{"alert", "alert", `[1,2]`},
	}
	var epoch string
	for i, w := range want {
		f := s.next()
		var env envelope
		if err := json.Unmarshal([]byte(f.data), &env); err != nil {
			t.Fatalf("frame %d data %q: %v", i, f.data, err)
		}
		if i == 0 {
			epoch = env.Epoch
		}
		if f.event != w.event || env.Type != w.typ || string(env.Body) != w.body || env.Room != "chat.1" ||
			env.Seq != uint64(i+1) || env.Epoch != epoch || f.id != epoch+":"+strconv.Itoa(i+1) ||
			env.TS < time.Now().Add(-time.Minute).UnixMilli() || strings.Contains(f.data, "\n") {
			t.Fatalf("frame %d: %+v / %+v, want event %q type %q body %s", i, f, env, w.event, w.typ, w.body)
		}
	}
}

func TestHeartbeat(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{Heartbeat: 30 * time.Millisecond}})
	s := p.subscribe(t, "hb", "")
	expectAnchor(t, s)
	for i := 0; i < 3; i++ {
		if f, _ := s.nextAny(); f.comment != "hb" {
			t.Fatalf("frame %+v, want the heartbeat comment", f)
		}
	}
}

func TestResumePoint(t *testing.T) {
	cases := []struct {
		name    string
		query   func(ids []string) string
		headers func(ids []string) []string
		first   uint64
	}{
		{"header", nil, func(ids []string) []string { return []string{"Last-Event-ID", ids[2]} }, 4},
		{"query", func(ids []string) string { return "lastEventId=" + ids[1] }, nil, 3},
		{"header wins over query", func(ids []string) string { return "lastEventId=" + ids[0] },
			func(ids []string) []string { return []string{"Last-Event-ID", ids[4]} }, 6},
		{"bare seq is the current epoch", nil, func([]string) []string { return []string{"Last-Event-ID", "3"} }, 4},
		{"zero replays everything", func(ids []string) string { return "lastEventId=" + strings.TrimSuffix(ids[0], "1") + "0" }, nil, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t, podConfig{})
			var ids []string
			for i := 1; i <= 6; i++ {
				ids = append(ids, p.publish(t, "r", `{"i":`+strconv.Itoa(i)+`}`))
			}
			var query string
			var headers []string
			if tc.query != nil {
				query = tc.query(ids)
			}
			if tc.headers != nil {
				headers = tc.headers(ids)
			}
			s := p.subscribe(t, "r", query, headers...)
			for seq := tc.first; seq <= 6; seq++ {
				if got := s.next().seq(t); got != seq {
					t.Fatalf("got seq %d, want %d", got, seq)
				}
			}
			p.publish(t, "r-other", `1`) // another room: nothing of it arrives here
			id := p.publish(t, "r", `{"live":true}`)
			if f := s.next(); f.id != id {
				t.Fatalf("live frame %q, want %q", f.id, id)
			}
		})
	}
}

func TestResync(t *testing.T) {
	p := newPod(t, podConfig{history: 5})
	var last string
	for i := 0; i < 20; i++ {
		last = p.publish(t, "r", `1`)
	}
	epoch, _, _ := strings.Cut(last, ":")
	cases := []struct {
		name, from string
		fork       bool // the resync goes back in the reader's epoch
	}{
		{"trimmed", epoch + ":3", false},
		{"other epoch", "zzzzzzzz:19", false},
		{"ahead of head", epoch + ":99", true},
		{"bare ahead", "99", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := p.subscribe(t, "r", "", "Last-Event-ID", tc.from)
			f := s.next()
			var data map[string]any
			if err := json.Unmarshal([]byte(f.data), &data); err != nil {
				t.Fatal(err)
			}
			if f.event != "resync" || f.id != last || data["room"] != "r" || data["epoch"] != epoch || data["seq"] != float64(seqOf(last)) ||
				tc.fork != (data["fork"] == true) || len(data) != map[bool]int{false: 3, true: 4}[tc.fork] {
				t.Fatalf("got %+v, want a resync at %s", f, last)
			}
			id := p.publish(t, "r", `2`)
			if f := s.next(); f.id != id {
				t.Fatalf("after resync: %+v, want live %s", f, id)
			}
			last = id
		})
	}
}

func seqOf(id string) uint64 {
	n, _ := strconv.ParseUint(id[strings.IndexByte(id, ':')+1:], 10, 64)
	return n
}

func TestResyncOnEmptyRoom(t *testing.T) {
	p := newPod(t, podConfig{})
	s := p.subscribe(t, "fresh", "", "Last-Event-ID", "oldepoch:12")
	f := s.next()
	if f.event != "resync" || f.data != `{"room":"fresh","epoch":"","seq":0}` {
		t.Fatalf("got %+v", f)
	}
	id := p.publish(t, "fresh", `1`)
	if f := s.next(); f.id != id || !strings.HasSuffix(id, ":1") {
		t.Fatalf("got %+v, want %s", f, id)
	}
}

// TestReplayThenLiveHasNoHoleOrDuplicate resumes clients from many points while a
// publisher runs flat out: each must see every seq after its resume point once, in
// order.
func TestReplayThenLiveHasNoHoleOrDuplicate(t *testing.T) {
	p := newPod(t, podConfig{history: 5000, queue: 4096})
	const total = 3000
	ids := make(chan string, total)
	go func() {
		defer close(ids)
		for i := 0; i < total; i++ {
			ids <- p.publish(t, "hot", `{"i":`+strconv.Itoa(i)+`}`)
		}
	}()
	var wg sync.WaitGroup
	var resumeFrom []string
	for id := range ids {
		if n, _ := strconv.Atoi(id[strings.IndexByte(id, ':')+1:]); n%300 == 0 {
			resumeFrom = append(resumeFrom, id)
			s := p.subscribe(t, "hot", "", "Last-Event-ID", id)
			wg.Go(func() {
				want := uint64(n) + 1
				for want <= total {
					f := s.next()
					if got := f.seq(t); got != want {
						t.Errorf("resumed after %s: got seq %d, want %d", id, got, want)
						return
					}
					want++
				}
			})
		}
	}
	wg.Wait()
	if len(resumeFrom) != total/300 {
		t.Fatalf("resumed %d clients", len(resumeFrom))
	}
}

func TestClientGoneCleansUp(t *testing.T) {
	p := newPod(t, podConfig{})
	var streams []*stream
	for i := 0; i < 10; i++ {
		s := p.subscribe(t, "room"+strconv.Itoa(i%3), "")
		s.nextAny()
		streams = append(streams, s)
	}
	replaytest.Eventually(t, 10*time.Second, "10 members", func() bool { return p.rooms.Len() == 10 })
	for _, s := range streams {
		s.close()
	}
	replaytest.Eventually(t, 10*time.Second, "members and subscriptions released", func() bool {
		st := p.rooms.Stats()
		return st.Members == 0 && st.Subscriptions == 0 && st.Rooms == 0
	})
}

func TestShedEndsWithRetryAndResumesCleanly(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{RetryMin: 100 * time.Millisecond, RetryMax: 200 * time.Millisecond}})
	s := p.subscribe(t, "r", "")
	s.nextAny()
	first := p.publish(t, "r", `1`)
	if f := s.next(); f.id != first {
		t.Fatalf("got %+v", f)
	}
	res := do(t, http.MethodPost, p.admin.URL+"/admin/shed?count=5", "")
	if res.status != http.StatusOK || strings.TrimSpace(res.body) != `{"closed":1}` {
		t.Fatalf("shed: %d %s", res.status, res.body)
	}
	rest := s.waitEnd()
	if len(rest) != 1 || rest[0].retry < 100 || rest[0].retry > 200 {
		t.Fatalf("stream ended with %+v, want one final retry hint in [100, 200]", rest)
	}
	second := p.publish(t, "r", `2`)
	again := p.subscribe(t, "r", "", "Last-Event-ID", first)
	if f := again.next(); f.id != second {
		t.Fatalf("resumed with %+v, want %s", f, second)
	}
}

func TestDrainingAnswers200AndEnds(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{RetryMin: time.Second, RetryMax: 2 * time.Second}})
	open := p.subscribe(t, "r", "")
	expectAnchor(t, open)
	p.drain.Start()
	if res := do(t, http.MethodGet, p.public.URL+"/readyz", ""); res.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz while draining: %d", res.status)
	}
	<-p.drain.Done()
	if rest := open.waitEnd(); len(rest) != 1 || rest[0].retry < 1000 || rest[0].retry > 2000 {
		t.Fatalf("open stream ended with %+v, want a final retry hint", rest)
	}
	late := p.subscribe(t, "r", "")
	frames := late.waitEnd()
	if late.res.StatusCode != http.StatusOK || len(frames) != 1 || frames[0].retry < 2000 || frames[0].retry > 4000 {
		t.Fatalf("late stream: %d %+v, want 200, a longer retry hint and an end", late.res.StatusCode, frames)
	}
}
