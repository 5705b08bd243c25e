package gateway_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// expectResyncAt reads the next frame and checks it is a resync at want, with want
// as its id.
func expectResyncAt(t *testing.T, s *stream, room string, want replay.Position) {
	t.Helper()
	f := s.next()
	var data struct {
		Room  string `json:"room"`
		Epoch string `json:"epoch"`
		Seq   uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(f.data), &data); err != nil {
		t.Fatalf("resync data %q: %v", f.data, err)
	}
	if f.event != "resync" || f.id != want.String() || data.Room != room || data.Epoch != want.Epoch || data.Seq != want.Seq {
		t.Fatalf("got %+v, want a resync at %s", f, want)
	}
}

// TestResumeBeyondMaxSeq: a resume point past replay.MaxSeq (16 digits) or at the
// largest uint64 (20 digits) is well formed but ahead of every head: 200, a resync
// at the head, then live events, in embedded and in fleet mode.
func TestResumeBeyondMaxSeq(t *testing.T) {
	pods := map[string]func(t *testing.T) *pod{
		"embedded": func(t *testing.T) *pod { return newPod(t, podConfig{}) },
		"fleet": func(t *testing.T) *pod {
			return newFleetPod(t, redistest.SharedStandalone(t), replay.RedisConfig{}, podConfig{})
		},
	}
	ids := []struct{ name, id string }{
		{"16 digits", "1000000000000000"},
		{"MaxSeq", "999999999999999"},
		{"20 digits", "18446744073709551615"},
		{"past uint64", "99999999999999999999"},
		{"32 digits", "12345678901234567890123456789012"},
	}
	for mode, newP := range pods {
		t.Run(mode, func(t *testing.T) {
			p := newP(t)
			room := redistest.Prefix(t)
			last := p.publish(t, room, `1`)
			head, err := replay.ParsePosition(last)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range ids {
				for _, from := range []string{tc.id, head.Epoch + ":" + tc.id} {
					s := p.subscribe(t, room, "", "Last-Event-ID", from)
					if s.res.StatusCode != 200 {
						t.Fatalf("%s %s: status %d", tc.name, from, s.res.StatusCode)
					}
					expectResyncAt(t, s, room, head)
					id := p.publish(t, room, `2`)
					if f := s.next(); f.id != id {
						t.Fatalf("%s %s: after the resync got %+v, want live %s", tc.name, from, f, id)
					}
					head, _ = replay.ParsePosition(id)
					s.close()
				}
			}
		})
	}
}

// expectIDs reads the next frames and checks they are the events ids, in order.
func expectIDs(t *testing.T, s *stream, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if f := s.next(); f.id != id || f.event == "resync" {
			t.Fatalf("got %+v, want event %s", f, id)
		}
	}
}

// TestEpochRollDeliversTheNewEpochFromItsStart: a room idle past its history TTL
// starts a new epoch. Live members, and a client resuming from the old epoch, get a
// resync at the point before the new epoch's first event, then every event of it.
func TestEpochRollDeliversTheNewEpochFromItsStart(t *testing.T) {
	clock := replaytest.NewClock(time.Unix(1731312000, 0))
	p := newPod(t, podConfig{mem: replay.MemoryConfig{HistoryTTL: time.Minute, Now: clock.Now}})
	const room = "r"
	live := p.subscribe(t, room, "")
	old := []string{p.publish(t, room, `1`), p.publish(t, room, `2`)}
	expectIDs(t, live, old...)

	clock.Advance(2 * time.Minute)
	fresh := []string{p.publish(t, room, `3`), p.publish(t, room, `4`)}
	start, _ := replay.ParsePosition(fresh[0])
	start.Seq = 0
	expectResyncAt(t, live, room, start)
	expectIDs(t, live, fresh...)

	resumed := p.subscribe(t, room, "", "Last-Event-ID", old[1])
	expectResyncAt(t, resumed, room, start)
	expectIDs(t, resumed, fresh...)
	next := p.publish(t, room, `5`)
	expectIDs(t, live, next)
	expectIDs(t, resumed, next)
}

// TestFleetKeyLossDeliversTheNewEpoch: Redis loses a room's keys; the next publish
// starts a new epoch. Members get a resync before its first event and every
// acknowledged event of it, and so does a client resuming from the old epoch.
func TestFleetKeyLossDeliversTheNewEpoch(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	p := newFleetPod(t, srv, replay.RedisConfig{}, podConfig{})
	room := redistest.Prefix(t)
	members := []*stream{p.subscribe(t, room, ""), p.subscribe(t, room, "")}
	old := []string{p.publish(t, room, `1`), p.publish(t, room, `2`)}
	for _, m := range members {
		expectIDs(t, m, old...)
	}

	srv.MustDo(t, "DEL", "room:{"+room+"}:seq", "room:{"+room+"}:log")
	var fresh []string
	for i := range 5 {
		fresh = append(fresh, p.publish(t, room, strconv.Itoa(i)))
	}
	start, _ := replay.ParsePosition(fresh[0])
	if start.Seq != 1 || fresh[0] == old[0] {
		t.Fatalf("after the keys were lost the log appended %s, want seq 1 of a new epoch", fresh[0])
	}
	start.Seq = 0
	for _, m := range members {
		expectResyncAt(t, m, room, start)
		expectIDs(t, m, fresh...)
	}
	resumed := p.subscribe(t, room, "", "Last-Event-ID", old[1])
	expectResyncAt(t, resumed, room, start)
	expectIDs(t, resumed, fresh...)
}
