package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strconv"
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

// TestBatchResultsAreTheJSONAnswer: the hand-written batch answer is byte for byte
// what encoding/json wrote without HTML escaping, every other escape included.
func TestBatchResultsAreTheJSONAnswer(t *testing.T) {
	results := []batchResult{
		{Status: 201, Room: "a.b~c", Epoch: "k3x9q2ab", Seq: 7},
		{Status: 400, Room: "<b>{\"x\n\u2028", Error: "invalid_room", Message: "room names are 1 to 128 characters"},
		{Status: 201, Room: "z", Epoch: "0", Seq: replay.MaxSeq},
		{Status: 503, Room: "q", Error: "unavailable", Message: "the event log (redis at 127.0.0.1:6379) is unavailable: connection refused; the event was not published; retry later"},
	}
	want := make([]batchResult, len(results))
	copy(want, results)
	for i := range want {
		if want[i].Status == 201 {
			want[i].ID = want[i].Epoch + ":" + strconv.FormatUint(want[i].Seq, 10)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(want); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	writeBatchResults(rec, results)
	if got := rec.Body.String(); got != buf.String() {
		t.Errorf("answer\n%s\nwant\n%s", got, buf.String())
	}
}

// FuzzDecodeBatch: the one-pass decoding and the item-by-item one agree on every
// body the one-pass decoding takes.
func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`[{"room":"a","type":"t","body":{"x":[1,2]},"idempotencyKey":"k"}]`))
	f.Add([]byte(`[null,{"ROOM":"b","body":"s"},{"room":"c","room":"d","body":1}]`))
	f.Add([]byte(`[1,{"room":2}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		items, bad, aerr := decodeBatch(raw)
		var raws []json.RawMessage
		if err := json.Unmarshal(raw, &raws); err != nil || raws == nil {
			if aerr == nil {
				t.Fatalf("%q: decoded %d items, but it is not a JSON array", raw, len(items))
			}
			return
		}
		if aerr != nil || len(items) != len(raws) {
			t.Fatalf("%q: %v, %d items for %d", raw, aerr, len(items), len(raws))
		}
		for i, r := range raws {
			var it batchItem
			err := json.Unmarshal(r, &it)
			if (err != nil) != (bad != nil && bad[i] != nil) {
				t.Fatalf("%q item %d: alone %v, in the batch %v", raw, i, err, bad)
			}
			if err == nil && (it.Room != items[i].Room || it.Type != items[i].Type ||
				it.IdempotencyKey != items[i].IdempotencyKey || !bytes.Equal(it.Body, items[i].Body)) {
				t.Fatalf("%q item %d: alone %+v, in the batch %+v", raw, i, it, items[i])
			}
		}
	})
}
