package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
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
