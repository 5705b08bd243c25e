package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// muxURL is the multiplexed stream's URL for rooms, with extra query text.
func muxURL(base string, rooms []string, query string) string {
	v := url.Values{"room": rooms}
	u := base + "/events?" + v.Encode()
	if query != "" {
		u += "&" + query
	}
	return u
}

// subscribeMany opens the multiplexed stream of rooms; headers come as name, value
// pairs.
func (p *pod) subscribeMany(t testing.TB, rooms []string, query string, headers ...string) *stream {
	t.Helper()
	return openStreamAt(t, muxURL(p.public.URL, rooms, query), headers...)
}

// muxEvent is a frame of a multiplexed stream: its envelope's room and place, and
// the token it carries.
type muxEvent struct {
	event string
	room  string
	pos   replay.Position
	token string
	body  string
}

func (s *stream) nextMux() muxEvent {
	s.t.Helper()
	f := s.next()
	ev := s.envelope(f)
	if !strings.HasPrefix(f.id, "m1.") {
		s.t.Fatalf("frame %+v: the id is not a token", f)
	}
	ev.token = f.id
	return ev
}

// envelope reads an event's or a resync's data (of a single-room or a multiplexed
// stream: it names the room either way).
func (s *stream) envelope(f frame) muxEvent {
	s.t.Helper()
	var d struct {
		Room  string          `json:"room"`
		Epoch string          `json:"epoch"`
		Seq   uint64          `json:"seq"`
		Body  json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal([]byte(f.data), &d); err != nil {
		s.t.Fatalf("frame %+v: %v", f, err)
	}
	return muxEvent{event: f.event, room: d.Room, pos: replay.Position{Epoch: d.Epoch, Seq: d.Seq}, body: string(d.Body)}
}

// anchor reads the stream's first frames up to its anchor and returns the token.
func (s *stream) anchor() string {
	s.t.Helper()
	return s.muxAnchor().token
}

// muxAnchorFrame is a multiplexed stream's anchor: its token and each room's
// position as its data names it.
type muxAnchorFrame struct {
	token string
	rooms map[string]string
}

// muxAnchor reads the stream's first frames up to its anchor and checks its form:
// event anchor, the token as its id and one line of data, {"rooms":{…}}.
func (s *stream) muxAnchor() muxAnchorFrame {
	s.t.Helper()
	for {
		f, ok := s.nextAny()
		if !ok {
			s.t.Fatal("stream ended before its anchor")
		}
		if f.event != gatewaytest.AnchorType {
			continue
		}
		var d struct {
			Rooms map[string]string `json:"rooms"`
		}
		if !f.hasID || !strings.HasPrefix(f.id, "m1.") || strings.Contains(f.data, "\n") ||
			json.Unmarshal([]byte(f.data), &d) != nil || len(d.Rooms) == 0 {
			s.t.Fatalf("anchor %+v, want the token as its id and {\"rooms\":{…}} as its data", f)
		}
		return muxAnchorFrame{token: f.id, rooms: d.Rooms}
	}
}

func TestMultiRequestsRefused(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxRoomsPerStream: 3}})
	good := replay.FormatToken([]string{"a", "b"}, []replay.Position{{Epoch: "e", Seq: 1}, {}}, []bool{false, true})
	for _, tc := range []struct {
		name    string
		url     string
		headers []string
		status  int
		code    string
	}{
		{"no room", p.public.URL + "/events", nil, 400, "invalid_rooms"},
		{"an empty room", p.public.URL + "/events?room=", nil, 400, "invalid_rooms"},
		{"a bad name", muxURL(p.public.URL, []string{"a", "b{c}"}, ""), nil, 400, "invalid_rooms"},
		{"too many rooms", muxURL(p.public.URL, []string{"a", "b", "c", "d"}, ""), nil, 400, "too_many_rooms"},
		{"a malformed token", muxURL(p.public.URL, []string{"a", "b"}, ""), []string{"Last-Event-ID", "m1.x"}, 400, "invalid_last_event_id"},
		{"a single-room id", muxURL(p.public.URL, []string{"a", "b"}, ""), []string{"Last-Event-ID", "e:1"}, 400, "invalid_last_event_id"},
		{"another room set's token", muxURL(p.public.URL, []string{"a", "c"}, ""), []string{"Last-Event-ID", good}, 400, "invalid_last_event_id"},
		{"a forged query token", muxURL(p.public.URL, []string{"a", "b"}, "lastEventId="+url.QueryEscape(good+".x")), nil, 400, "invalid_last_event_id"},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				res := do(t, method, tc.url, "", tc.headers...)
				if res.status != tc.status {
					t.Fatalf("status %d, want %d (%s)", res.status, tc.status, res.body)
				}
				if method == http.MethodGet && !strings.Contains(res.body, `"error":"`+tc.code+`"`) {
					t.Fatalf("body %s, want error %s", res.body, tc.code)
				}
			})
		}
	}
	// A repeated name counts once: three names, two rooms, within a cap of three;
	// and a good token of the same set opens.
	t.Run("repeated names and a good token", func(t *testing.T) {
		s := p.subscribeMany(t, []string{"b", "a", "b", "a"}, "", "Last-Event-ID", good)
		if s.res.StatusCode != http.StatusOK || !strings.HasPrefix(s.res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d %s", s.res.StatusCode, s.res.Header.Get("Content-Type"))
		}
		if tok := s.anchor(); !strings.HasPrefix(tok, "m1.") {
			t.Fatalf("anchor %q", tok)
		}
	})
}

// TestMultiResumeEveryRoom: a stream of three rooms is read part way; the token of
// the last frame read resumes every room with no hole and no duplicate, from the
// header, from the query parameter, and the header wins over a stale query.
func TestMultiResumeEveryRoom(t *testing.T) {
	p := newPod(t, podConfig{})
	testMultiResume(t, p, p, []string{"mx-a", "mx-b", "mx-c"})
}

// TestFleetMultiResumeEveryRoom is the same on the 3-primary cluster, across pods:
// the rooms hash to different slots.
func TestFleetMultiResumeEveryRoom(t *testing.T) {
	c := redistest.SharedCluster(t)
	a := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	b := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	pre := redistest.Prefix(t)
	testMultiResume(t, a, b, []string{pre + "-a", pre + "-b", pre + "-c"})
}

func testMultiResume(t *testing.T, first, second *pod, rooms []string) {
	s := first.subscribeMany(t, rooms, "")
	anchor := s.anchor()
	want := map[string][]string{}
	publish := func(n int) {
		for i := 0; i < n; i++ {
			room := rooms[i%len(rooms)]
			want[room] = append(want[room], first.publish(t, room, `{"i":`+strconv.Itoa(i)+`}`))
		}
	}
	publish(30)
	got := map[string][]string{}
	var last muxEvent
	for i := 0; i < 14; i++ {
		last = s.nextMux()
		got[last.room] = append(got[last.room], last.pos.String())
	}
	s.close()
	publish(30)
	for _, tc := range []struct {
		name    string
		query   string
		headers []string
	}{
		{"header", "", []string{"Last-Event-ID", last.token}},
		{"query", "lastEventId=" + url.QueryEscape(last.token), nil},
		{"the header wins", "lastEventId=" + url.QueryEscape(anchor), []string{"Last-Event-ID", last.token}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := second.subscribeMany(t, rooms, tc.query, tc.headers...)
			r.anchor()
			seen := map[string][]string{}
			for room, ids := range got {
				seen[room] = append([]string(nil), ids...)
			}
			for range 60 - 14 {
				ev := r.nextMux()
				seen[ev.room] = append(seen[ev.room], ev.pos.String())
			}
			for _, room := range rooms {
				if strings.Join(seen[room], " ") != strings.Join(want[room], " ") {
					t.Fatalf("room %s: %v, want %v", room, seen[room], want[room])
				}
			}
		})
	}
	// The anchor alone resumes every room from where the first stream joined.
	r := second.subscribeMany(t, rooms, "", "Last-Event-ID", anchor)
	r.anchor()
	seen := map[string][]string{}
	for range 60 {
		ev := r.nextMux()
		seen[ev.room] = append(seen[ev.room], ev.pos.String())
	}
	for _, room := range rooms {
		if strings.Join(seen[room], " ") != strings.Join(want[room], " ") {
			t.Fatalf("from the anchor, room %s: %v, want %v", room, seen[room], want[room])
		}
	}
}

// TestMultiResyncConcernsOneRoom: a token whose position in one room is older than
// that room's history gets one resync, of that room, naming it, at its head (as a
// single-room stream does); the other room resumes with no resync.
func TestMultiResyncConcernsOneRoom(t *testing.T) {
	p := newPod(t, podConfig{history: 5})
	rooms := []string{"rs-a", "rs-b"}
	var idsA, idsB []string
	for i := 0; i < 20; i++ {
		idsA = append(idsA, p.publish(t, "rs-a", `1`))
	}
	for i := 0; i < 3; i++ {
		idsB = append(idsB, p.publish(t, "rs-b", `1`))
	}
	posA, _ := replay.ParsePosition(idsA[1])
	posB, _ := replay.ParsePosition(idsB[0])
	tok := replay.FormatToken(rooms, []replay.Position{posA, posB}, []bool{false, false})
	s := p.subscribeMany(t, rooms, "", "Last-Event-ID", tok)
	s.anchor()
	f := s.next()
	if f.event != "resync" || !strings.Contains(f.data, `"room":"rs-a"`) {
		t.Fatalf("first frame %+v, want a resync of rs-a", f)
	}
	head, _ := replay.ParsePosition(idsA[19])
	var d struct {
		Epoch string `json:"epoch"`
		Seq   uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(f.data), &d); err != nil || d.Seq != head.Seq {
		t.Fatalf("resync %s (%v), want it at %v", f.data, err, head)
	}
	var got []string
	for range 2 {
		ev := s.nextMux()
		if ev.event == "resync" {
			t.Fatalf("a second resync: %+v", ev)
		}
		got = append(got, ev.room+"@"+ev.pos.String())
	}
	var want []string
	for _, id := range idsB[1:] {
		want = append(want, "rs-b@"+id)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after the resync %v, want %v", got, want)
	}
}

// TestMultiHotRoomDoesNotStarveQuiet: with a hot room's queue holding 200 events and
// a quiet room's one, the quiet event goes out in the first batch, after at most one
// per-room budget of the hot room's (the order of arrival, not a time, is asserted).
func TestMultiHotRoomDoesNotStarveQuiet(t *testing.T) {
	p := newPod(t, podConfig{queue: 1024})
	gate := make(chan struct{})
	held := make(chan struct{}, 1)
	var open bool
	gateway.SetMuxBatchHook(p.srv, func() {
		if open {
			return
		}
		select {
		case held <- struct{}{}:
		default:
		}
		<-gate
		open = true
	})
	rooms := []string{"fair-hot", "fair-quiet"}
	s := p.subscribeMany(t, rooms, "")
	s.anchor()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never reached its first batch")
	}
	for i := 0; i < 200; i++ {
		p.publish(t, "fair-hot", `1`)
	}
	quiet := p.publish(t, "fair-quiet", `"q"`)
	close(gate)
	hot := 0
	for {
		ev := s.nextMux()
		if ev.room == "fair-quiet" {
			if ev.pos.String() != quiet {
				t.Fatalf("quiet event %v, want %s", ev.pos, quiet)
			}
			break
		}
		hot++
	}
	// 128 items per batch over two rooms: a budget of 64 each.
	if hot > 64 {
		t.Fatalf("the quiet room's event came after %d of the hot room's, want at most one budget (64)", hot)
	}
	for ; hot < 200; hot++ {
		if ev := s.nextMux(); ev.room != "fair-hot" || ev.pos.Seq != uint64(hot+1) {
			t.Fatalf("hot event %d: %+v", hot+1, ev)
		}
	}
}

// TestMultiGrantsPerRoom: every room is checked against the credential; one room
// not granted refuses the whole stream with 403, none with 401.
func TestMultiGrantsPerRoom(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	tok := p.token(t, "EdDSA", "ana", time.Hour, []string{"team-7.*"}, nil)
	for _, tc := range []struct {
		name    string
		rooms   []string
		headers []string
		status  int
	}{
		{"all granted", []string{"team-7.a", "team-7.b"}, []string{"Authorization", "Bearer " + tok}, 200},
		{"granted and anonymous", []string{"team-7.a", "public.news"}, []string{"Authorization", "Bearer " + tok}, 200},
		{"one not granted", []string{"team-7.a", "team-8.a"}, []string{"Authorization", "Bearer " + tok}, 403},
		{"no credential", []string{"team-7.a", "public.news"}, nil, 401},
		{"anonymous rooms only", []string{"public.a", "public.news"}, nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, http.MethodHead, muxURL(p.public.URL, tc.rooms, ""), "", tc.headers...)
			if res.status != tc.status {
				t.Fatalf("HEAD status %d, want %d", res.status, tc.status)
			}
			if tc.status != 200 {
				res := do(t, http.MethodGet, muxURL(p.public.URL, tc.rooms, ""), "", tc.headers...)
				if res.status != tc.status || !strings.Contains(res.body, `"error":"`) {
					t.Fatalf("GET %d %s, want %d and a JSON error", res.status, res.body, tc.status)
				}
				return
			}
			s := p.subscribeMany(t, tc.rooms, "", tc.headers...)
			if s.res.StatusCode != 200 {
				t.Fatalf("GET status %d", s.res.StatusCode)
			}
			s.anchor()
		})
	}
}

// TestMultiEndsWithOneReauth: at the credential's expiry the stream ends with one
// reauth naming every room, a retry hint and the end.
func TestMultiEndsWithOneReauth(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	short := p.token(t, "EdDSA", "ana", 2*time.Second, []string{"team-7.*"}, nil)
	rooms := []string{"team-7.a", "team-7.b"}
	s := p.subscribeMany(t, rooms, "", "Authorization", "Bearer "+short)
	s.anchor()
	reauths := 0
	for _, f := range s.waitEnd() {
		if f.event == "reauth" {
			reauths++
			if !strings.Contains(f.data, `"room":"team-7.a","rooms":["team-7.a","team-7.b"],"exp":`) {
				t.Fatalf("reauth %s", f.data)
			}
		}
	}
	if reauths != 1 {
		t.Fatalf("%d reauths, want 1", reauths)
	}
}

// TestMultiSlowRoomEndsTheStream: one room's queue overflowing ends the whole
// stream, which resumes by its token.
func TestMultiSlowRoomEndsTheStream(t *testing.T) {
	p := newPod(t, podConfig{queue: 4})
	gate := make(chan struct{})
	gateway.SetMuxBatchHook(p.srv, func() { <-gate })
	s := p.subscribeMany(t, []string{"slow-a", "slow-b"}, "")
	tok := s.anchor()
	var ids []string
	for i := 0; i < 6; i++ {
		ids = append(ids, p.publish(t, "slow-a", `1`))
	}
	close(gate)
	s.waitEnd()
	r := p.subscribeMany(t, []string{"slow-a", "slow-b"}, "", "Last-Event-ID", tok)
	r.anchor()
	for _, id := range ids {
		if ev := r.nextMux(); ev.pos.String() != id {
			t.Fatalf("resumed %v, want %s", ev.pos, id)
		}
	}
}

// TestMultiCountsAsOneConnection: /admin/stats counts a multiplexed stream as one
// connection, whatever its rooms, and says how many are multiplexed.
func TestMultiCountsAsOneConnection(t *testing.T) {
	p := newPod(t, podConfig{})
	s := p.subscribeMany(t, []string{"cnt-a", "cnt-b", "cnt-c"}, "")
	s.anchor()
	one := p.subscribe(t, "cnt-a", "")
	one.nextAny()
	var st struct {
		Connections        int64 `json:"connections"`
		MultiplexedStreams int64 `json:"multiplexed_streams"`
	}
	res := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "")
	if err := json.Unmarshal([]byte(res.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Connections != 2 || st.MultiplexedStreams != 1 {
		t.Fatalf("connections %d, multiplexed_streams %d; want 2 and 1", st.Connections, st.MultiplexedStreams)
	}
}

// TestMultiRevokedEndsWithOneReauth: revoking the user ends the multiplexed stream
// with one reauth, and the stream counts once among the user's streams.
func TestMultiRevokedEndsWithOneReauth(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	c := gatewaytest.UserClaims("ana", time.Hour, []string{"team-7.*"}, nil)
	c["aud"], c["iss"], c["iat"] = testAudience, testIssuer, time.Now().Add(-10*time.Second).Unix()
	tok := p.keys.Sign(t, "RS256", c)
	s := p.subscribeMany(t, []string{"team-7.a", "team-7.b", "team-7.c"}, "", "Authorization", "Bearer "+tok)
	s.anchor()
	if a := accessStats(t, p.pod); a.Users != 1 || len(a.TopUsers) != 1 || a.TopUsers[0].Streams != 1 {
		t.Fatalf("/admin/stats access %+v, want ana with one stream", a)
	}
	revoke(t, p.pod, `{"sub":"ana"}`)
	reauths := 0
	for _, f := range s.waitEnd() {
		if f.event == "reauth" {
			reauths++
		}
	}
	if reauths != 1 {
		t.Fatalf("%d reauths, want 1", reauths)
	}
}
