package wire_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/replay/wire"
)

func TestTokenRoundTrip(t *testing.T) {
	rooms := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name     string
		pos      []wire.Position
		anchored []bool
		want     string // empty: not checked
	}{
		{"epochs and seqs", []wire.Position{{"k3x9q0aa", 48}, {"zz", 1}, {"e1", wire.MaxSeq}}, []bool{false, false, false}, ""},
		{"bare seqs", []wire.Position{{"", 0}, {"", 35}, {"", 36}}, []bool{false, false, false}, ""},
		{"anchors", []wire.Position{{}, {"k", 7}, {}}, []bool{true, false, true}, ""},
		{"the largest seq", []wire.Position{{"e", math.MaxUint64}, {}, {}}, []bool{false, true, true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := wire.FormatToken(rooms, tc.pos, tc.anchored)
			pos, anchored, err := wire.ParseToken(tok, rooms)
			if err != nil {
				t.Fatalf("ParseToken(%q): %v", tok, err)
			}
			for i := range rooms {
				if anchored[i] != tc.anchored[i] || !anchored[i] && pos[i] != tc.pos[i] {
					t.Fatalf("room %s: %v %v, want %v %v (token %q)", rooms[i], pos[i], anchored[i], tc.pos[i], tc.anchored[i], tok)
				}
			}
		})
	}
}

// TestTokenExact pins the grammar, which roomcast.js computes too.
func TestTokenExact(t *testing.T) {
	rooms := []string{"lobby", "news"}
	tok := wire.FormatToken(rooms, []wire.Position{{"k3x9q0aa", 48}, {}}, []bool{false, true})
	if want := "m1.fjod8o.k3x9q0aa:1c."; tok != want {
		t.Fatalf("token %q, want %q", tok, want)
	}
}

func TestTokenRejected(t *testing.T) {
	rooms := []string{"a", "b"}
	good := wire.FormatToken(rooms, []wire.Position{{"e", 1}, {"e", 2}}, []bool{false, false})
	for _, tc := range []struct{ name, tok string }{
		{"empty", ""},
		{"a single-room id", "e:1"},
		{"another version", "m2" + good[2:]},
		{"another room set", wire.FormatToken([]string{"a", "c"}, []wire.Position{{"e", 1}, {"e", 2}}, []bool{false, false})},
		{"one position too few", strings.TrimSuffix(good, ".e:2")},
		{"one position too many", good + ".e:3"},
		{"a bad epoch", strings.Replace(good, "e:1", "e!:1", 1)},
		{"an empty epoch", strings.Replace(good, "e:1", ":1", 1)},
		{"an empty seq", strings.Replace(good, "e:1", "e:", 1)},
		{"an upper-case seq", strings.Replace(good, "e:2", "e:Z", 1)},
		{"a seq too long", strings.Replace(good, "e:2", "e:"+strings.Repeat("1", 14), 1)},
		{"a set too long", "m1.00000000.e:1.e:2"},
		{"too long", good + strings.Repeat(" ", 0) + strings.Repeat("x", wire.MaxTokenLen)},
		{"a line break", strings.Replace(good, "e:1", "e\n:1", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := wire.ParseToken(tc.tok, rooms); !errors.Is(err, wire.ErrBadToken) {
				t.Fatalf("ParseToken(%q) = %v, want ErrBadToken", tc.tok, err)
			}
		})
	}
}

// TestTokenSize documents the figures of gateway/README.md: 32 rooms with 8-character epochs.
func TestTokenSize(t *testing.T) {
	rooms := make([]string, 32)
	pos := make([]wire.Position, 32)
	worst := make([]wire.Position, 32)
	for i := range rooms {
		rooms[i] = "room-" + strings.Repeat("x", 2) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		pos[i] = wire.Position{Epoch: "k3x9q0aa", Seq: 1_000_000}
		worst[i] = wire.Position{Epoch: "k3x9q0aa", Seq: wire.MaxSeq}
	}
	anchored := make([]bool, 32)
	typical := len(wire.FormatToken(rooms, pos, anchored))
	big := len(wire.FormatToken(rooms, worst, anchored))
	t.Logf("32 rooms: %d bytes at seq 1e6, %d bytes at the largest seq", typical, big)
	if typical != 457 || big != 649 {
		t.Fatalf("token sizes %d and %d: the README's figures are stale", typical, big)
	}
}

func FuzzParseToken(f *testing.F) {
	rooms := []string{"a", "b", "c"}
	f.Add(wire.FormatToken(rooms, []wire.Position{{"e", 1}, {}, {"", 9}}, []bool{false, true, false}))
	f.Add("m1.0...")
	f.Add("m1.zzzzzzz.a:b.c:d.e:f")
	f.Fuzz(func(t *testing.T, s string) {
		pos, anchored, err := wire.ParseToken(s, rooms)
		if err != nil {
			return
		}
		if len(pos) != len(rooms) || len(anchored) != len(rooms) {
			t.Fatalf("%d positions for %d rooms", len(pos), len(rooms))
		}
		// What parses formats back to a token that parses to the same positions.
		again, anchored2, err := wire.ParseToken(wire.FormatToken(rooms, pos, anchored), rooms)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", s, err)
		}
		for i := range pos {
			if again[i] != pos[i] || anchored2[i] != anchored[i] {
				t.Fatalf("%q: room %d %v/%v, then %v/%v", s, i, pos[i], anchored[i], again[i], anchored2[i])
			}
		}
	})
}
