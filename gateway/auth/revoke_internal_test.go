package auth

import (
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// TestRevocationsBounded: a full set forgets lapsed revocations first, then the one
// that lapses first, and keeps a newer sub revocation's later At.
func TestRevocationsBounded(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := newRevocations(3)
	rev := func(v string, until time.Duration) replay.Revocation {
		return replay.Revocation{Kind: "sub", Value: v, At: t0, Until: t0.Add(until)}
	}
	for _, r := range []replay.Revocation{rev("a", 3*time.Hour), rev("b", time.Hour), rev("c", 2*time.Hour)} {
		if !s.add(r, t0) {
			t.Fatalf("add %s: not news", r.Value)
		}
	}
	if s.add(rev("a", time.Hour), t0) {
		t.Fatal("a revocation already covered was news")
	}
	s.add(rev("d", 4*time.Hour), t0) // full: b lapses first
	for v, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if got := s.refuses(Principal{Sub: v}, t0); got != want {
			t.Errorf("sub %s refused = %v, want %v", v, got, want)
		}
	}
	later := t0.Add(150 * time.Minute) // c has lapsed: it goes, a stays although it lapses first among the rest
	s.add(rev("e", 5*time.Hour), later)
	for v, want := range map[string]bool{"a": true, "c": false, "d": true, "e": true} {
		if got := s.refuses(Principal{Sub: v}, later); got != want {
			t.Errorf("after c lapsed: sub %s refused = %v, want %v", v, got, want)
		}
	}
	if len(s.m) != 3 {
		t.Fatalf("%d revocations held, bound 3", len(s.m))
	}
	newer := rev("a", 4*time.Hour)
	newer.At = later
	if !s.add(newer, later) || !s.refuses(Principal{Sub: "a", IssuedAt: later.Add(-time.Second)}, later) {
		t.Fatal("a later revocation of the same user did not move its At")
	}
	if s.refuses(Principal{Sub: "a", IssuedAt: later.Add(time.Second)}, later) {
		t.Fatal("a token issued after the revocation is refused")
	}
}
