package gateway_test

import (
	"testing"
)

// expectAnchor reads the frames of a stream opened without a resume point up to its
// anchor: the retry hint, then a block with only an id, which it returns.
func expectAnchor(t *testing.T, s *stream) string {
	t.Helper()
	if f, _ := s.nextAny(); f.retry == 0 || f.hasID || f.data != "" {
		t.Fatalf("first frame %+v, want the retry hint", f)
	}
	f, _ := s.nextAny()
	if !f.hasID || f.id == "" || f.data != "" || f.event != "" || f.retry != 0 || f.comment != "" {
		t.Fatalf("second frame %+v, want an anchor: an id and nothing else", f)
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
