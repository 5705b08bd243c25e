package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"
	"testing/iotest"

	"github.com/roomcast/roomcast/replay"
)

// FuzzReadBodyInto: the pooled reader takes exactly what io.ReadAll would, and
// refuses exactly the bodies longer than the limit, whatever the reads' sizes and
// whatever the buffer held before.
func FuzzReadBodyInto(f *testing.F) {
	f.Add([]byte(`{"a":1}`), uint16(64), uint8(0), true)
	f.Add(bytes.Repeat([]byte("x"), 5000), uint16(4999), uint8(7), false)
	f.Add([]byte{}, uint16(0), uint8(1), true)
	f.Fuzz(func(t *testing.T, body []byte, limit uint16, used uint8, oneByte bool) {
		var r io.Reader = bytes.NewReader(body)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		req := httptest.NewRequest("POST", "/", r)
		if used%2 == 0 {
			req.ContentLength = int64(len(body))
		} else {
			req.ContentLength = -1
		}
		b := bytes.Repeat([]byte{'!'}, int(used))
		bp := &b
		aerr := readBodyInto(bp, req, int64(limit))
		if len(body) > int(limit) {
			if aerr == nil || aerr.Status != 413 {
				t.Fatalf("%d bytes with limit %d: %v, want 413", len(body), limit, aerr)
			}
			return
		}
		if aerr != nil {
			t.Fatalf("%d bytes with limit %d: %v", len(body), limit, aerr)
		}
		if !bytes.Equal(*bp, body) {
			t.Fatalf("read %q, want %q", *bp, body)
		}
	})
}

// TestAppendPublishedIsTheJSONAnswer: the hand-written answer is byte for byte what
// encoding/json wrote.
func TestAppendPublishedIsTheJSONAnswer(t *testing.T) {
	for _, ev := range []replay.Event{
		{Epoch: "k3x9q2ab", Seq: 1},
		{Epoch: "0", Seq: replay.MaxSeq},
		{Epoch: "abc-_DEF", Seq: 48},
	} {
		room := "room.name_~-42"
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(published{Room: room, Epoch: ev.Epoch, Seq: ev.Seq, ID: ev.ID()}); err != nil {
			t.Fatal(err)
		}
		if got := appendPublished(nil, room, ev); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("answer %q, want %q", got, want.Bytes())
		}
	}
}
