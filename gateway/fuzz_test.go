package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
)

// oneBlock decodes frame with the repository's SSE decoder and fails t unless it is
// exactly one block.
func oneBlock(t *testing.T, frame []byte) gatewaytest.Frame {
	t.Helper()
	dec := gatewaytest.NewDecoder(bufio.NewReader(bytes.NewReader(frame)), nil)
	f, err := dec.NextFrame()
	if err != nil {
		t.Fatalf("frame %q: %v", frame, err)
	}
	if extra, err := dec.NextFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("a second block %+v (%v) in %q", extra, err, frame)
	}
	return f
}

func FuzzAppendFrame(f *testing.F) {
	f.Add("k3x9q:48", "chat", []byte(`{"a":1}`))
	f.Add("a\nid: evil", "x\r\nevent: resync", []byte("line1\r\nline2\rline3\n"))
	f.Add("nul\x00", "", []byte("data: fake\n\nid: 9"))
	f.Fuzz(func(t *testing.T, id, event string, data []byte) {
		frame := gateway.AppendFrame(nil, id, event, data)
		if !bytes.HasSuffix(frame, []byte("\n\n")) || bytes.Contains(frame[:len(frame)-2], []byte("\n\n")) {
			t.Fatalf("frame %q does not end exactly once", frame)
		}
		// Every line is one of the three fields: nothing was injected, not even a
		// field the decoder would ignore.
		for _, line := range strings.FieldsFunc(string(frame), func(r rune) bool { return r == '\r' || r == '\n' }) {
			if name, _, _ := strings.Cut(line, ":"); name != "id" && name != "event" && name != "data" {
				t.Fatalf("injected field %q in %q", name, frame)
			}
		}
		// The repository's decoder reads back what was meant.
		got := oneBlock(t, frame)
		clean := func(s string) string { return strings.NewReplacer("\r", "", "\n", "", "\x00", "").Replace(s) }
		if got.ID != clean(id) || got.Event != clean(event) || got.Retry != -1 || got.Comment != "" {
			t.Fatalf("id %q event %q became %+v", id, event, got)
		}
		if strings.Contains(got.ID, "\x00") {
			t.Fatal("NUL in id")
		}
		norm := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
		if !got.HasData || got.Data != norm {
			t.Fatalf("data %q came back as %q", data, got.Data)
		}
	})
}

func FuzzEncodeBody(f *testing.F) {
	f.Add("application/json", []byte(`{"a": [1, 2, {"b": "c\n"}]}`))
	f.Add("application/json", []byte("\"line\\nbreak\""))
	f.Add("text/plain", []byte("hello\nworld\r\n"))
	f.Add("text/plain", []byte("\xff"))
	f.Add("application/json", []byte(`{"a":1} {"b":2}`))
	f.Add("application/json", []byte("{\"a\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, mediaType string, raw []byte) {
		if mediaType != "text/plain" {
			mediaType = "application/json"
		}
		body, aerr := gateway.EncodeBody(mediaType, raw)
		if aerr != nil {
			if mediaType == "application/json" && json.Valid(raw) && utf8.Valid(raw) && len(bytes.TrimSpace(raw)) > 0 {
				t.Fatalf("valid JSON %q refused: %v", raw, aerr)
			}
			if mediaType == "text/plain" && utf8.Valid(raw) {
				t.Fatalf("valid text %q refused: %v", raw, aerr)
			}
			return
		}
		if !json.Valid(body) || bytes.ContainsAny(body, "\r\n") {
			t.Fatalf("body %q is not one line of JSON", body)
		}
		// Numbers as json.Number: a valid number may not fit a float64.
		decode := func(b []byte, v *any) error {
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			return d.Decode(v)
		}
		var got, want any
		if err := decode(body, &got); err != nil {
			t.Fatal(err)
		}
		if mediaType == "text/plain" {
			want = string(raw)
		} else if err := decode(raw, &want); err != nil {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q encoded as %q: content changed", raw, body)
		}
		// Framed as an event, the body survives the SSE round trip unchanged.
		ev := replay.Event{Room: "r", Epoch: "e", Seq: 1, Body: body}
		framed := oneBlock(t, gateway.EventFrame(ev))
		if framed.Data != string(ev.AppendJSON(nil)) || strings.ContainsAny(framed.Data, "\r\n") {
			t.Fatalf("frame data %q", framed.Data)
		}
	})
}

// FuzzPublish sends arbitrary publish requests through the real router: the answer is
// always one of the documented statuses with a JSON body, and a 201 means the event
// is in the log with the body as sent.
func FuzzPublish(f *testing.F) {
	f.Add("r", "application/json", "", "", []byte(`{"a":1}`))
	f.Add("a{b}", "text/plain", "chat", "k", []byte("hi"))
	f.Add("r", "application/json; charset=utf-8", "resync", "", []byte(`1`))
	f.Add("r", "text/plain", "", "key with space", []byte("x"))
	p := newPod(f, podConfig{gw: gateway.Config{MaxBody: 512}})
	h := p.srv.Public()
	f.Fuzz(func(t *testing.T, room, contentType, typ, key string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/rooms/x/events", bytes.NewReader(body))
		req.URL.Path = "/rooms/" + room + "/events"
		req.RemoteAddr = "127.0.0.1:1"
		req.Header.Set("Content-Type", contentType)
		if typ != "" {
			req.Header.Set("Event-Type", typ)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 201, 400, 404, 413, 415:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("status %d with a non-JSON body %q", rec.Code, rec.Body)
		}
		if rec.Code != 201 {
			if out["error"] == nil || out["message"] == nil {
				t.Fatalf("error body %v", out)
			}
			return
		}
		pos, err := replay.ParsePosition(out["id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		evs, _, err := p.log.Since(t.Context(), room, replay.Position{Epoch: pos.Epoch, Seq: pos.Seq - 1}, 1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("published event not in the log: %v %v", evs, err)
		}
	})
}

// FuzzEventFrame checks the one-allocation event encoder against the general one:
// whatever the envelope holds, the frame parses back to the same id, event and data.
func FuzzEventFrame(f *testing.F) {
	f.Add("room", "k3x9q", "chat", []byte(`{"a":1}`), uint64(48))
	f.Add("r", "e\n", "x\ry", []byte("1\n2"), uint64(0))
	f.Fuzz(func(t *testing.T, room, epoch, typ string, body []byte, seq uint64) {
		ev := replay.Event{Room: room, Epoch: epoch, Seq: seq, TS: 1, Type: typ, Body: body}
		event := typ
		if event == replay.DefaultType {
			event = ""
		}
		want := gateway.AppendFrame(nil, ev.ID(), event, ev.AppendJSON(nil))
		got := gateway.EventFrame(ev)
		if oneBlock(t, got) != oneBlock(t, want) {
			t.Fatalf("fast frame %q, general frame %q", got, want)
		}
	})
}
