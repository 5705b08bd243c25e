package replay

import (
	"math"
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
