package replay

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// FuzzDecodeRevocation: whatever room:revoked holds or its channel carries, decoding
// never panics, and what it accepts is a valid revocation that encodes back to the
// same thing.
func FuzzDecodeRevocation(f *testing.F) {
	r := Revocation{Kind: "sub", Value: "user-1", At: time.UnixMilli(1700000000000), Until: time.UnixMilli(1700000060000)}
	member, notice := encodeRevocation(r)
	f.Add(member, float64(1700000060000))
	f.Add(notice, float64(0))
	f.Add(`{"kind":"jti","value":"\u00e9\"<>","at":1,"until":2}`, 2.0)
	f.Add(`{"kind":"sub","value":"x","at":1}{"kind":"sub"}`, 5.0)
	f.Add(`{"kind":"sub","value":"x","at":1,"at":3}`, 2.0)
	f.Add("", math.Inf(1))
	f.Fuzz(func(t *testing.T, s string, score float64) {
		if r, ok := decodeRevocationNotice(s); ok {
			if !validRevocation(r) {
				t.Fatalf("notice %q accepted as invalid %+v", s, r)
			}
			_, n := encodeRevocation(r)
			if back, ok := decodeRevocationNotice(n); !ok || back != r {
				t.Fatalf("notice %q: %+v encodes to %q, which decodes to %+v, %v", s, r, n, back, ok)
			}
		}
		if r, ok := decodeRevocationMember(s, score); ok {
			if !validRevocation(r) || float64(r.Until.UnixMilli()) != score {
				t.Fatalf("member %q (score %v) accepted as %+v", s, score, r)
			}
			m, _ := encodeRevocation(r)
			if back, ok := decodeRevocationMember(m, score); !ok || back != r {
				t.Fatalf("member %q: %+v encodes to %q, which decodes to %+v, %v", s, r, m, back, ok)
			}
		}
	})
}

func TestRevocationRoundTrip(t *testing.T) {
	r := Revocation{Kind: "jti", Value: "é<&>\"\\", At: time.UnixMilli(1700000000000), Until: time.UnixMilli(1700000060000)}
	member, notice := encodeRevocation(r)
	if got, ok := decodeRevocationNotice(notice); !ok || got != r {
		t.Fatalf("notice %s: %+v, %v", notice, got, ok)
	}
	if got, ok := decodeRevocationMember(member, 1700000060000); !ok || got != r {
		t.Fatalf("member %s: %+v, %v", member, got, ok)
	}
	if _, ok := decodeRevocationMember(notice, 1700000060000); ok {
		t.Fatalf("a notice (with until) accepted as a member")
	}
}

// TestRevKnownReconcile: what a log remembers and Redis lacks is written back; what
// lapsed is forgotten; a full set in Redis gets back only what outlasts its first to
// lapse (Redis would drop the rest again at once); the memory is bounded.
func TestRevKnownReconcile(t *testing.T) {
	const now = int64(1_700_000_000_000)
	var k revKnown
	k.add("a", now+1000, now)
	k.add("b", now+2000, now)
	k.add("lapsed", now, now)
	names := func(es []revEntry) map[string]int64 {
		m := map[string]int64{}
		for _, e := range es {
			m[e.member] = e.until
		}
		return m
	}
	if lost := names(k.reconcile(revLoad{present: []revEntry{{"a", now + 1000}}, read: 1, floor: now + 1000}, now)); len(lost) != 1 || lost["b"] != now+2000 {
		t.Fatalf("Redis holds a, the log knows a and b: lost %v, want b", lost)
	}
	// A member read from Redis is remembered, to be written back later.
	if lost := k.reconcile(revLoad{present: []revEntry{{"a", now + 1000}, {"b", now + 2000}, {"c", now + 3000}}, read: 3, floor: now + 1000}, now); len(lost) != 0 {
		t.Fatalf("Redis holds everything: lost %v", lost)
	}
	if lost := names(k.reconcile(revLoad{}, now+1500)); len(lost) != 2 || lost["b"] == 0 || lost["c"] == 0 {
		t.Fatalf("Redis empty at +1.5s: lost %v, want b and c (a lapsed)", lost)
	}
	if lost := names(k.reconcile(revLoad{read: maxRevocations, floor: now + 2500}, now)); len(lost) != 1 || lost["c"] == 0 {
		t.Fatalf("Redis full, its first lapsing at +2.5s: lost %v, want only c", lost)
	}
	for i := range maxRevocations + 10 {
		k.add(strconv.Itoa(i), now+10_000+int64(i), now)
	}
	if len(k.m) != maxRevocations {
		t.Fatalf("%d remembered, want at most %d", len(k.m), maxRevocations)
	}
	if _, ok := k.m["0"]; ok {
		t.Fatal("the first to lapse was kept over the bound")
	}
}
