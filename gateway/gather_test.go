package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// sseBatch decodes a batch of SSE frames.
func sseBatch(t *testing.T, buf []byte) []gatewaytest.Frame {
	t.Helper()
	d := gatewaytest.NewDecoder(bufio.NewReader(bytes.NewReader(buf)), nil)
	var fs []gatewaytest.Frame
	f, err := d.NextFrame()
	for ; err == nil; f, err = d.NextFrame() {
		fs = append(fs, f)
	}
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return fs
}

// frameName names a frame "room@seq", or "resync room@seq".
func frameName(kind, room string, seq uint64) string {
	name := room + "@" + strconv.FormatUint(seq, 10)
	if kind == "resync" {
		return "resync " + name
	}
	return name
}

// batchFrames names the frames of a batch: SSE frames, or WebSocket messages
// ending at ends.
func batchFrames(t *testing.T, buf []byte, ends []int, ws bool) []string {
	t.Helper()
	var got []string
	if !ws {
		for _, f := range sseBatch(t, buf) {
			var m wsMsg // an SSE event's data is the envelope a WebSocket event carries
			if err := json.Unmarshal([]byte(f.Data), &m); err != nil {
				t.Fatalf("frame %+v: %v", f, err)
			}
			got = append(got, frameName(f.Event, m.Room, m.Seq))
		}
		return got
	}
	start := 0
	for _, end := range ends {
		var m wsMsg
		if err := json.Unmarshal(buf[start:end], &m); err != nil {
			t.Fatalf("message %q: %v", buf[start:end], err)
		}
		got = append(got, frameName(m.Kind, m.Room, m.Seq))
		start = end
	}
	if start != len(buf) {
		t.Fatalf("%d bytes of the batch after its last message", len(buf)-start)
	}
	return got
}

// events names room's events from seq first to last.
func events(room string, first, last uint64) []string {
	var s []string
	for seq := first; seq <= last; seq++ {
		s = append(s, frameName("event", room, seq))
	}
	return s
}

// runs writes frames briefly: a room's consecutive events as one run, "room@1-42".
func runs(frames []string) string {
	var b strings.Builder
	for i := 0; i < len(frames); {
		room, first, _ := strings.Cut(frames[i], "@")
		seq, _ := strconv.ParseUint(first, 10, 64)
		j := i + 1
		for j < len(frames) && frames[j] == frameName("event", room, seq+uint64(j-i)) {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(frames[i])
		if j > i+1 {
			b.WriteString("-" + strconv.FormatUint(seq+uint64(j-i-1), 10))
		}
		i = j
	}
	return "[" + b.String() + "]"
}

// gatherer is one of the round-robin's callers as a test drives it.
type gatherer struct {
	*gateway.Gatherer
	ws bool
}

// batch gathers one batch and checks its frames, in order, and whether more is
// left.
func (c gatherer) batch(t *testing.T, wantMore bool, want ...[]string) {
	t.Helper()
	buf, ends, _, more := c.Gather()
	if got, w := batchFrames(t, buf, ends, c.ws), slices.Concat(want...); !slices.Equal(got, w) {
		t.Fatalf("batch %s, want %s", runs(got), runs(w))
	}
	if more != wantMore {
		t.Fatalf("more is %v, want %v", more, wantMore)
	}
}

// eachGatherer runs test for each caller of the round-robin (a multiplexed stream,
// a WebSocket connection), over fresh members of rooms rr-a, rr-b and rr-c.
func eachGatherer(t *testing.T, test func(t *testing.T, g *gatherRig, c gatherer)) {
	for _, ws := range []bool{false, true} {
		t.Run(map[bool]string{false: "sse", true: "ws"}[ws], func(t *testing.T) {
			g := newGatherRig(t)
			ms := g.join("rr-a", "rr-b", "rr-c")
			c := gatherer{gateway.NewMuxGatherer(g.p.srv, ms), ws}
			if ws {
				c.Gatherer = gateway.NewWSGatherer(g.p.srv, ms)
			}
			test(t, g, c)
		})
	}
}

// TestRoundRobinTakesABudgetFromEachRoom: a hot room gives a batch at most its
// budget, after which the quiet rooms' events go out in the same batch; each room's
// events keep their order, and the next batch starts with the next room.
func TestRoundRobinTakesABudgetFromEachRoom(t *testing.T) {
	eachGatherer(t, func(t *testing.T, g *gatherRig, c gatherer) {
		g.publish("rr-a", 200, `1`, 200)
		g.publish("rr-b", 1, `"q"`, 1)
		// 128 items per batch over three rooms: a budget of 42 each.
		c.batch(t, true, events("rr-a", 1, 42), events("rr-b", 1, 1))
		g.publish("rr-b", 1, `"q"`, 1)
		g.publish("rr-c", 1, `"q"`, 1)
		c.batch(t, true, events("rr-b", 2, 2), events("rr-c", 1, 1), events("rr-a", 43, 84))
		c.batch(t, true, events("rr-a", 85, 126))
		g.publish("rr-b", 1, `"q"`, 1)
		c.batch(t, true, events("rr-a", 127, 168), events("rr-b", 3, 3))
		c.batch(t, false, events("rr-a", 169, 200))
		c.batch(t, false)
	})
}

// TestRoundRobinFullBatchEndsTheTurns: a batch that reaches its bytes gives no
// further room a turn, and the next batch starts with the first room that had none:
// the quiet room's event goes out after two batches of the hot rooms.
func TestRoundRobinFullBatchEndsTheTurns(t *testing.T) {
	eachGatherer(t, func(t *testing.T, g *gatherRig, c gatherer) {
		big := `"` + strings.Repeat("x", 2048) + `"` // 42 of them fill a batch
		g.publish("rr-a", 100, big, 100)
		g.publish("rr-b", 100, big, 100)
		g.publish("rr-c", 1, `"q"`, 1)
		c.batch(t, true, events("rr-a", 1, 42))
		c.batch(t, true, events("rr-b", 1, 42))
		c.batch(t, true, events("rr-c", 1, 1), events("rr-a", 43, 84))
		c.batch(t, true, events("rr-b", 43, 84))
		c.batch(t, false, events("rr-a", 85, 100), events("rr-b", 85, 100))
	})
}

// TestMuxItemFromAnotherEpoch: a multiplexed stream's live item from another epoch
// than its room's sent position goes out after a resync to just before it, each
// frame's token holding the room's position at that frame; an item at the sent
// position is dropped (stepItem decides, as for one room's stream).
func TestMuxItemFromAnotherEpoch(t *testing.T) {
	g := newGatherRig(t)
	names := []string{"ep-a", "ep-b"}
	c := gateway.NewMuxGatherer(g.p.srv, g.join(names...))
	c.SetSent(1, replay.Position{Epoch: "e1", Seq: 5})
	for _, ev := range []replay.Event{
		{Room: "ep-b", Epoch: "e1", Seq: 5, Body: json.RawMessage(`1`)},
		{Room: "ep-b", Epoch: "e2", Seq: 3, Body: json.RawMessage(`1`)},
	} {
		c.Add(1, &rooms.Item{Pos: ev.Position(), Event: ev})
	}
	buf, _, n, _ := c.Gather()
	var got []string
	for _, f := range sseBatch(t, buf) {
		pos, _, err := replay.ParseToken(f.ID, names)
		if err != nil {
			t.Fatalf("frame %+v: %v", f, err)
		}
		got = append(got, f.Event+" "+pos[1].String())
	}
	if want := []string{"resync e2:2", " e2:3"}; !slices.Equal(got, want) {
		t.Fatalf("frames %q, want %q", got, want)
	}
	if n != 1 {
		t.Errorf("%d events counted, want 1", n)
	}
}
