package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
)

// parseFrame is a reference SSE parser (the WHATWG algorithm for one block): it
// returns every field it saw, so an injected field shows up.
func parseFrame(b []byte) (fields []string, id, event string, data []string) {
	s := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n") {
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		fields = append(fields, name)
		switch name {
		case "id":
			id = value
		case "event":
			event = value
		case "data":
			data = append(data, value)
		}
	}
	return fields, id, event, data
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
		fields, gotID, gotEvent, gotData := parseFrame(frame)
		clean := func(s string) string { return strings.NewReplacer("\r", "", "\n", "", "\x00", "").Replace(s) }
		if gotID != clean(id) || gotEvent != clean(event) {
			t.Fatalf("id %q event %q became %q %q", id, event, gotID, gotEvent)
		}
		if strings.Contains(gotID, "\x00") {
			t.Fatal("NUL in id")
		}
		for _, name := range fields {
			if name != "id" && name != "event" && name != "data" {
				t.Fatalf("injected field %q in %q", name, frame)
			}
		}
		norm := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
		if strings.Join(gotData, "\n") != norm {
			t.Fatalf("data %q came back as %q", data, gotData)
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
		_, _, _, data := parseFrame(gateway.EventFrame(ev))
		if len(data) != 1 || data[0] != string(ev.AppendJSON(nil)) {
			t.Fatalf("frame data %q", data)
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
		_, id1, ev1, data1 := parseFrame(got)
		_, id2, ev2, data2 := parseFrame(want)
		if id1 != id2 || ev1 != ev2 || strings.Join(data1, "\n") != strings.Join(data2, "\n") {
			t.Fatalf("fast frame %q, general frame %q", got, want)
		}
	})
}
