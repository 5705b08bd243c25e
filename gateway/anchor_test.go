package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
)

// expectAnchor reads the frames of a stream opened without a resume point up to its
// anchor: the retry hint, then event anchor with the room's position as its id and
// {"room","epoch","seq"} of that position as its data. It returns the id.
func expectAnchor(t *testing.T, s *stream) string {
	t.Helper()
	if f, _ := s.nextAny(); f.retry == 0 || f.hasID || f.data != "" {
		t.Fatalf("first frame %+v, want the retry hint", f)
	}
	f, _ := s.nextAny()
	if f.event != gatewaytest.AnchorType || !f.hasID || f.id == "" || f.retry != 0 || f.comment != "" {
		t.Fatalf("second frame %+v, want an anchor: event anchor with an id", f)
	}
	var d struct {
		Room  *string `json:"room"`
		Epoch *string `json:"epoch"`
		Seq   *uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(f.data), &d); err != nil || d.Room == nil || d.Epoch == nil || d.Seq == nil {
		t.Fatalf("anchor data %q, want {\"room\",\"epoch\",\"seq\"}", f.data)
	}
	if pos := (replay.Position{Epoch: *d.Epoch, Seq: *d.Seq}); pos.String() != f.id {
		t.Fatalf("anchor data %q names %s, its id is %s", f.data, pos, f.id)
	}
	return f.id
}

// TestFreshStreamIsAnchored: a stream opened without a resume point gets the room's
// position as an id at once, so that a reconnect before the first event resumes
// from there and gets whatever was published meanwhile.
func TestFreshStreamIsAnchored(t *testing.T) {
	cases := []struct {
		name     string
		history  int // events published before the stream opens
		wantNone string
	}{
		{name: "room with history", history: 3},
		{name: "room without history", history: 0, wantNone: "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t, podConfig{})
			const room = "r"
			want := tc.wantNone
			for range tc.history {
				want = p.publish(t, room, `1`)
			}
			s := p.subscribe(t, room, "")
			anchor := expectAnchor(t, s)
			if anchor != want {
				t.Fatalf("anchor %q, want the room's position %q", anchor, want)
			}
			s.close()
			missed := []string{p.publish(t, room, `2`), p.publish(t, room, `3`)}
			again := p.subscribe(t, room, "", "Last-Event-ID", anchor)
			expectIDs(t, again, missed...)
			live := p.publish(t, room, `4`)
			expectIDs(t, again, live)
		})
	}
}

// firstBlocks opens url and returns its first n blocks exactly as sent, each with
// the blank line that ends it; headers come as name, value pairs.
func firstBlocks(t *testing.T, url string, n int, headers ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res := doRequest(t, req, headers...)
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	var out []string
	var b strings.Builder
	for len(out) < n {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		b.WriteString(line)
		if line == "\n" {
			out = append(out, b.String())
			b.Reset()
		}
	}
	return out
}

var retryBlock = regexp.MustCompile(`^retry: [0-9]+\n\n$`)

// TestAnchorOnTheWire pins the anchor's bytes on both kinds of stream: a named event
// (event: anchor) with its id and one line of compact JSON, right after retry:. A
// block with data is kept by every SSE client, and EventSource hands a named event
// only to its listeners, never to onmessage.
func TestAnchorOnTheWire(t *testing.T) {
	p := newPod(t, podConfig{})
	p.publish(t, "busy", `1`)
	id := p.publish(t, "busy", `2`)
	at, _ := replay.ParsePosition(id)
	check := func(t *testing.T, got []string, want ...string) {
		t.Helper()
		if !retryBlock.MatchString(got[0]) {
			t.Fatalf("first block %q, want the retry hint", got[0])
		}
		for i, w := range want {
			if got[i+1] != w {
				t.Fatalf("block %d:\n%q\nwant\n%q", i+1, got[i+1], w)
			}
		}
	}
	t.Run("room with history", func(t *testing.T) {
		check(t, firstBlocks(t, p.public.URL+"/rooms/busy/events", 2),
			"id: "+id+"\nevent: anchor\ndata: {\"room\":\"busy\",\"epoch\":\""+at.Epoch+"\",\"seq\":2}\n\n")
	})
	t.Run("room without history", func(t *testing.T) {
		check(t, firstBlocks(t, p.public.URL+"/rooms/quiet/events", 2),
			"id: 0\nevent: anchor\ndata: {\"room\":\"quiet\",\"epoch\":\"\",\"seq\":0}\n\n")
	})
	t.Run("a resumed stream has none", func(t *testing.T) {
		from := at
		from.Seq--
		got := firstBlocks(t, p.public.URL+"/rooms/busy/events", 2, "Last-Event-ID", from.String())
		check(t, got)
		if !strings.HasPrefix(got[1], "id: "+id+"\ndata: {") {
			t.Fatalf("block 1 %q, want the event %s right after retry:", got[1], id)
		}
	})
	rooms := []string{"busy", "quiet"}
	t.Run("multiplexed", func(t *testing.T) {
		token := replay.FormatToken(rooms, []replay.Position{at, {}}, []bool{false, false})
		check(t, firstBlocks(t, muxURL(p.public.URL, rooms, ""), 2),
			"id: "+token+"\nevent: anchor\ndata: {\"rooms\":{\"busy\":\""+id+"\",\"quiet\":\"0\"}}\n\n")
	})
	t.Run("multiplexed, resumed with an empty position", func(t *testing.T) {
		// A resumed multiplexed stream is anchored too: the empty position is filled in.
		from := replay.FormatToken(rooms, []replay.Position{at, {}}, []bool{false, true})
		token := replay.FormatToken(rooms, []replay.Position{at, {}}, []bool{false, false})
		check(t, firstBlocks(t, muxURL(p.public.URL, rooms, ""), 2, "Last-Event-ID", from),
			"id: "+token+"\nevent: anchor\ndata: {\"rooms\":{\"busy\":\""+id+"\",\"quiet\":\"0\"}}\n\n")
	})
}

// TestEveryResyncHasAnID: a resync's id is where a reconnect resumes; an empty room's
// resync says "0", the current epoch from its start.
func TestEveryResyncHasAnID(t *testing.T) {
	p := newPod(t, podConfig{})
	s := p.subscribe(t, "fresh", "", "Last-Event-ID", "oldepoch:12")
	if f := s.next(); f.event != "resync" || !f.hasID || f.id != "0" {
		t.Fatalf("got %+v, want a resync with id 0", f)
	}
	id := p.publish(t, "fresh", `1`)
	again := p.subscribe(t, "fresh", "", "Last-Event-ID", "0")
	expectIDs(t, again, id)
}
