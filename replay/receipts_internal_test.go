package replay

import (
	"testing"
	"time"
)

// FuzzDecodeAck: the decoder of stored acks never panics, and what it accepts is
// exactly what encodeAck writes: it encodes back to its input.
func FuzzDecodeAck(f *testing.F) {
	f.Add("k3x9q:48 1731312000123")
	f.Add("k3x9q:48  1731312000123")
	f.Add("48 1731312000123")
	f.Add("k3x9q:048 1731312000123")
	f.Add("k3x9q:48 0")
	f.Add(" ")
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := decodeAck("inbox.x", s)
		if !ok {
			if a != (Ack{}) {
				t.Fatalf("rejected %q, yet returned %+v", s, a)
			}
			return
		}
		if a.Room != "inbox.x" || encodeAck(a) != s || !validAckRecord(AckRecord{Client: "c", Session: "s", Acks: []Ack{a}}) {
			t.Fatalf("decodeAck(%q) = %+v: not its input", s, a)
		}
		if a.At.After(time.UnixMilli(maxSinceMS)) {
			t.Fatalf("accepted a time past the bound: %+v", a)
		}
	})
}
