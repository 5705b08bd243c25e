package gateway

import (
	"bytes"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// wsDelivered is a message or control frame a parser delivered.
type wsDelivered struct {
	op      ws.OpCode
	payload string
}

// parseAll feeds data to a parser with limit in pieces of at most chunk bytes and
// records what it delivers, the violation that ended it if one did, and whether
// it holds bytes afterwards.
func parseAll(data []byte, chunk, limit int) (got []wsDelivered, v *wsViolation, holds bool) {
	p := &wsParser{limit: limit}
	data = bytes.Clone(data) // the parser unmasks in place
	fn := func(op ws.OpCode, payload []byte) bool {
		got = append(got, wsDelivered{op, string(payload)})
		return true
	}
	for len(data) > 0 {
		n := min(chunk, len(data))
		if _, v = p.feed(data[:n], fn); v != nil {
			return got, v, p.pending() || p.msg != nil
		}
		data = data[n:]
	}
	return got, nil, p.pending() || p.msg != nil
}

// FuzzWSParser feeds any bytes to the idle loop's frame parser, whole and in
// pieces of any size: nothing panics, both deliver the same messages and control
// frames and end with the same violation, nothing delivered is larger than the
// limit, every text message is UTF-8, and a parser that refused a frame holds
// nothing.
func FuzzWSParser(f *testing.F) {
	ping := []byte(`{"v":1,"kind":"ping"}`)
	seeds := [][]byte{
		clientFrame(ws.OpText, true, ping, true),
		append(clientFrame(ws.OpText, false, ping[:5], true), append(clientFrame(ws.OpPing, true, []byte("p"), true), clientFrame(ws.OpContinuation, true, ping[5:], true)...)...),
		clientFrame(ws.OpText, true, ping, false),
		clientFrame(ws.OpClose, true, []byte{0x03, 0xe8, 'b', 'y', 'e'}, true),
		clientFrame(ws.OpClose, true, []byte{0x03}, true),
		clientFrame(ws.OpText, true, []byte{0xff}, true),
		clientFrame(ws.OpBinary, true, bytes.Repeat([]byte{7}, 300), true),
		{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0},
	}
	for _, s := range seeds {
		f.Add(s, uint16(1))
		f.Add(s, uint16(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		const limit = 512
		whole, wv, _ := parseAll(data, len(data)+1, limit)
		split, sv, holds := parseAll(data, int(chunk)%64+1, limit)
		if !slices.Equal(whole, split) {
			t.Fatalf("whole delivered %v, in pieces %v", whole, split)
		}
		if (wv == nil) != (sv == nil) || wv != nil && wv.code != sv.code {
			t.Fatalf("whole ended with %v, in pieces with %v", wv, sv)
		}
		if sv != nil && holds {
			t.Fatal("a parser that refused a frame holds bytes")
		}
		for _, d := range split {
			if len(d.payload) > limit {
				t.Fatalf("delivered %d bytes, over the limit", len(d.payload))
			}
			if d.op == ws.OpText && !utf8.ValidString(d.payload) {
				t.Fatalf("delivered text that is not UTF-8: %q", d.payload)
			}
		}
	})
}

// clientFrame makes a client frame, masked or not, with a fixed mask.
func clientFrame(op ws.OpCode, fin bool, payload []byte, masked bool) []byte {
	h := appendWSFrameHeader(nil, op, len(payload))
	if !fin {
		h[0] &^= 0x80
	}
	if !masked {
		return append(h, payload...)
	}
	h[1] |= 0x80
	mask := [4]byte{0x11, 0x22, 0x33, 0x44}
	h = append(h, mask[:]...)
	for i, c := range payload {
		h = append(h, c^mask[i&3])
	}
	return h
}

// TestWSParserHoldsNothingWhenIdle: once a whole frame is parsed, the parser keeps
// no buffer; while one is incomplete it keeps only its bytes.
func TestWSParserHoldsNothingWhenIdle(t *testing.T) {
	p := &wsParser{limit: 1 << 10}
	frame := clientFrame(ws.OpText, true, []byte(`{"v":1,"kind":"ping"}`), true)
	n := 0
	fn := func(ws.OpCode, []byte) bool { n++; return true }
	if _, v := p.feed(bytes.Clone(frame[:5]), fn); v != nil || n != 0 || len(p.part) != 5 {
		t.Fatalf("after 5 bytes: violation %v, %d delivered, %d held", v, n, len(p.part))
	}
	if _, v := p.feed(bytes.Clone(frame[5:]), fn); v != nil || n != 1 || p.part != nil || p.msg != nil {
		t.Fatalf("after the rest: violation %v, %d delivered, part %v, msg %v", v, n, p.part, p.msg)
	}
}
