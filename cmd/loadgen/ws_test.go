package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestWSMemberShare(t *testing.T) {
	tests := []struct {
		name        string
		subs, rooms int
		share       float64
	}{
		{name: "half of one room", subs: 10, rooms: 1, share: 0.5},
		{name: "half of four rooms", subs: 40, rooms: 4, share: 0.5},
		{name: "a third, uneven rooms", subs: 31, rooms: 4, share: 1.0 / 3},
		{name: "all", subs: 12, rooms: 5, share: 1},
		{name: "none", subs: 12, rooms: 5, share: 0},
		{name: "a share that is not exact in binary", subs: 300, rooms: 3, share: 0.29},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Rooms: tt.rooms, WSShare: tt.share}
			members, ws := make([]int, tt.rooms), make([]int, tt.rooms)
			for i := range tt.subs {
				members[i%tt.rooms]++
				if c.wsMember(i) {
					ws[i%tt.rooms]++
				}
			}
			for r := range tt.rooms {
				if want := int(float64(members[r])*tt.share + 1e-9); ws[r] != want {
					t.Errorf("room %d: %d of %d members over WebSocket, want %d", r, ws[r], members[r], want)
				}
			}
		})
	}
}

// wsScript is one connection of a scripted /ws server: the resume id its hello
// must carry, the frames after the welcome, and the close code to end with (0:
// hold the connection until the client goes).
type wsScript struct {
	resume string
	frames []string
	close  websocket.StatusCode
	// joined is the room's position in the welcome; empty means "0".
	joined string
	// waitAck, when set, is an ack the server waits for before it closes: acks
	// that arrive once the close has begun are not read.
	waitAck string
}

func wsEvent(epoch string, seq uint64) string {
	return fmt.Sprintf(`{"v":1,"kind":"event","id":"%s:%d","room":"r","epoch":%q,"seq":%d,"ts":1,"type":"message","body":{"t":%d}}`,
		epoch, seq, epoch, seq, time.Now().UnixNano())
}

func wsEvents(epoch string, from, to uint64) []string {
	var out []string
	for seq := from; seq <= to; seq++ {
		out = append(out, wsEvent(epoch, seq))
	}
	return out
}

// wsHelloSeen is what a scripted server read of one hello.
type wsHelloSeen struct {
	V      int               `json:"v"`
	Kind   string            `json:"kind"`
	Client string            `json:"client"`
	Boot   string            `json:"boot"`
	Rooms  map[string]string `json:"rooms"`
}

// wsScriptServer plays conns in order; its second result, called once the client
// has gone, returns what the hellos said and the acks (their ids) that came on
// every connection.
func wsScriptServer(t *testing.T, conns []wsScript) (*httptest.Server, func() ([]wsHelloSeen, []string)) {
	var (
		mu       sync.Mutex
		hellos   []wsHelloSeen
		acks     []string
		handlers sync.WaitGroup
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		if r.URL.Path != "/ws" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		mu.Lock()
		n := len(hellos)
		mu.Unlock()
		if n >= len(conns) {
			http.Error(w, "script over", http.StatusGone)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		_, p, err := c.Read(ctx)
		if err != nil {
			return
		}
		var h wsHelloSeen
		_ = json.Unmarshal(p, &h)
		mu.Lock()
		hellos = append(hellos, h)
		mu.Unlock()
		read := make(chan struct{})
		acked := make(chan string, 1024)
		go func() {
			defer close(read)
			for {
				_, p, err := c.Read(ctx)
				if err != nil {
					return
				}
				var a struct{ Kind, Room, ID string }
				if json.Unmarshal(p, &a) == nil && a.Kind == "ack" && a.Room == "r" {
					mu.Lock()
					acks = append(acks, a.ID)
					mu.Unlock()
					acked <- a.ID
				}
			}
		}()
		sc := conns[n]
		if h.Rooms["r"] != sc.resume {
			_ = c.Close(4400, "unexpected resume id")
			<-read
			return
		}
		joined := cmp.Or(sc.joined, "0")
		welcome := `{"v":1,"kind":"welcome","session":"s","rooms":{"r":"` + joined + `"}}`
		for _, f := range append([]string{welcome}, sc.frames...) {
			if c.Write(ctx, websocket.MessageText, []byte(f)) != nil {
				break
			}
		}
		for sc.waitAck != "" {
			select {
			case id := <-acked:
				if id == sc.waitAck {
					sc.waitAck = ""
				}
			case <-time.After(10 * time.Second):
				t.Errorf("no ack %s within 10s", sc.waitAck)
				sc.waitAck = ""
			}
		}
		if sc.close != 0 {
			_ = c.Close(sc.close, "scripted")
		}
		<-read
	}))
	t.Cleanup(srv.Close)
	// Once the client has gone, every handler ends: what they read is complete.
	return srv, func() ([]wsHelloSeen, []string) {
		handlers.Wait()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(hellos), slices.Clone(acks)
	}
}

func TestWSSubscriberScripted(t *testing.T) {
	tests := []struct {
		name   string
		conns  []wsScript
		target uint64
		fatal  bool
		want   counts
		acks   []string
	}{
		{
			name: "resumes after a drain, acknowledging every 32 events",
			conns: []wsScript{
				{frames: wsEvents("e", 1, 40), close: websocket.StatusServiceRestart, waitAck: "e:32"},
				{resume: "e:40", frames: wsEvents("e", 41, 70)},
			},
			target: 70, acks: []string{"e:32", "e:64"}, want: counts{deliveries: 70, reconnects: 1},
		},
		{
			name: "resumes after a slow-consumer close and a going-away close",
			conns: []wsScript{
				{frames: wsEvents("e", 1, 3), close: websocket.StatusTryAgainLater},
				{resume: "e:3", frames: wsEvents("e", 4, 5), close: websocket.StatusGoingAway},
				{resume: "e:5", frames: wsEvents("e", 6, 6)},
			},
			target: 6, want: counts{deliveries: 6, reconnects: 2},
		},
		{
			name: "a resync moves the resume point",
			conns: []wsScript{
				{frames: wsEvents("e", 1, 2), close: websocket.StatusServiceRestart},
				{resume: "e:2", frames: []string{`{"v":1,"kind":"resync","room":"r","id":"f:10","epoch":"f","seq":10}`}, close: websocket.StatusServiceRestart},
				{resume: "f:10", frames: wsEvents("f", 11, 11)},
			},
			target: 11, want: counts{deliveries: 3, resyncs: 1, reconnects: 2},
		},
		{
			name: "a gap across a reconnect is found",
			conns: []wsScript{
				{frames: wsEvents("e", 1, 2), close: websocket.StatusServiceRestart},
				{resume: "e:2", frames: wsEvents("e", 5, 5)},
			},
			target: 5, want: counts{deliveries: 3, gaps: 2, reconnects: 1},
		},
		{
			name: "a duplicate replayed on resume is found",
			conns: []wsScript{
				{frames: wsEvents("e", 1, 2), close: websocket.StatusServiceRestart},
				{resume: "e:2", frames: wsEvents("e", 2, 3)},
			},
			target: 3, want: counts{deliveries: 4, dups: 1, reconnects: 1},
		},
		{
			name: "a connection that ends before its first event resumes from where it joined",
			conns: []wsScript{
				{joined: "e:4", close: websocket.StatusServiceRestart},
				{resume: "e:4", joined: "e:4", frames: wsEvents("e", 5, 6)},
			},
			target: 6, want: counts{deliveries: 2, reconnects: 1},
		},
		{
			name: "the first event must follow the join point",
			conns: []wsScript{
				{joined: "e:4", frames: wsEvents("e", 7, 8)},
			},
			target: 8, want: counts{deliveries: 2, gaps: 2},
		},
		{
			name: "superseded is fatal",
			conns: []wsScript{
				{frames: wsEvents("e", 1, 2), close: 4409},
			},
			fatal: true, want: counts{deliveries: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := wsScriptServer(t, tt.conns)
			cfg := testConfig(srv.URL)
			cfg.WSShare = 1
			s := &subscriber{id: 7, room: &room{name: "r"}, hist: new(histogram), ws: newWSState("run1", 7, "r")}
			s.ws.ackInterval = time.Hour // acks by count alone, whatever the machine's pace
			ls := scriptedRun(t, &cfg, s, tt.target, tt.fatal)

			hellos, acks := seen()
			if len(hellos) != len(tt.conns) {
				t.Fatalf("%d hellos for %d scripted connections: %+v", len(hellos), len(tt.conns), hellos)
			}
			for i, h := range hellos {
				if h.V != 1 || h.Kind != "hello" || h.Client != "anon:loadgen-run1-7" || h.Boot != processBoot || len(h.Rooms) != 1 || h.Rooms["r"] != tt.conns[i].resume {
					t.Errorf("hello %d = %+v; want client anon:loadgen-run1-7, boot %s, rooms {r: %q}", i, h, processBoot, tt.conns[i].resume)
				}
			}
			if tt.acks != nil && strings.Join(acks, ",") != strings.Join(tt.acks, ",") {
				t.Errorf("acks = %q, want %q", acks, tt.acks)
			}
			if (s.fatal != nil) != tt.fatal {
				t.Errorf("fatal = %v, want fatal %v", s.fatal, tt.fatal)
			}
			if got := countsOf(s, ls); got != tt.want || s.reconnects != tt.want.reconnects {
				t.Errorf("counts %+v (own reconnects %d), want %+v", got, s.reconnects, tt.want)
			}
			if s.bytes.Load() == 0 {
				t.Error("no bytes counted")
			}
		})
	}
}

func TestWSBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"-protocol", "centrifugo", "-ws-share", "0.5", "-subs", "0"}, want: "-ws-share: -protocol centrifugo"},
		{args: []string{"-ws-share", "1.5"}, want: "-ws-share is a fraction"},
		{args: []string{"-ws-share", "-0.1"}, want: "-ws-share is a fraction"},
		{args: []string{"-ws-share", "NaN"}, want: "-ws-share is a fraction"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stderr strings.Builder
			if code := realMain(tt.args, io.Discard, &stderr); code != exitError || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitError, tt.want)
			}
		})
	}
}
