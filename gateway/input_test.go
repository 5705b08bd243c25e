package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// TestReservedTypes: the gateway's own frames (resync, reauth, anchor, expired) in any case,
// and the events EventSource dispatches itself, are refused on every publish path
// (one event, a batch, a WebSocket publish) with a message that names them;
// "message" is the default type and stays allowed.
func TestReservedTypes(t *testing.T) {
	p := newPod(t, podConfig{})
	url := p.public.URL + "/rooms/r/events"
	ct := []string{"Content-Type", "application/json"}
	ws := dialWS(t, p)
	ws.welcome("reserved", boot1, map[string]string{"other": ""})
	for _, typ := range []string{"resync", "Resync", "RESYNC", "reauth", "ReAuth", "anchor", "Anchor", "ANCHOR", "expired", "Expired", "EXPIRED", "error", "open"} {
		t.Run(typ, func(t *testing.T) {
			ws.send(map[string]any{"v": 1, "kind": "publish", "room": "r", "type": typ, "body": 1, "ref": typ})
			if m := ws.next(); m.Kind != "error" || m.Ref != typ || m.Error != "invalid_type" || !strings.Contains(m.Message, "reserved") {
				t.Fatalf("WebSocket publish: %+v, want error invalid_type saying the type is reserved", m)
			}
			for _, res := range []response{
				do(t, http.MethodPost, url, `1`, append([]string{"Event-Type", typ}, ct...)...),
				do(t, http.MethodPost, url+"?type="+typ, `1`, ct...),
			} {
				assertError(t, res, 400, "invalid_type")
				if !strings.Contains(res.body, "reserved") {
					t.Fatalf("the message does not say the type is reserved: %s", res.body)
				}
			}
			res := do(t, http.MethodPost, p.public.URL+"/events", `[{"room":"r","type":"`+typ+`","body":1}]`, ct...)
			var out []struct {
				Status         int
				Error, Message string
			}
			if err := json.Unmarshal([]byte(res.body), &out); err != nil || res.status != 200 || len(out) != 1 {
				t.Fatalf("batch: %d %s", res.status, res.body)
			}
			if out[0].Status != 400 || out[0].Error != "invalid_type" || !strings.Contains(out[0].Message, "reserved") {
				t.Fatalf("batch item: %+v", out[0])
			}
		})
	}
	// The default type, spelled out, publishes as the default: no event: line.
	s := p.subscribe(t, "r", "")
	s.nextAny()
	if res := do(t, http.MethodPost, url+"?type=message", `1`, ct...); res.status != 201 || !strings.Contains(res.body, `"seq":1,`) {
		t.Fatalf("type=message: %d %s (a reserved type was published before it?)", res.status, res.body)
	}
	if f := s.next(); f.event != "" || f.seq(t) != 1 {
		t.Fatalf("frame %+v", f)
	}
}

// TestInvalidUTF8InJSON: encoding/json's Compact lets invalid UTF-8 inside strings
// through; the gateway refuses it on both publish paths.
func TestInvalidUTF8InJSON(t *testing.T) {
	p := newPod(t, podConfig{})
	ct := []string{"Content-Type", "application/json"}
	res := do(t, http.MethodPost, p.public.URL+"/rooms/r/events", "{\"a\":\"\xff\xfe\"}", ct...)
	assertError(t, res, 400, "invalid_json")
	if !strings.Contains(res.body, "UTF-8") {
		t.Fatalf("the message does not name UTF-8: %s", res.body)
	}
	res = do(t, http.MethodPost, p.public.URL+"/events", "[{\"room\":\"r\",\"body\":\"\xc3\x28\"},{\"room\":\"r\",\"body\":\"ok \xc3\xa9\"}]", ct...)
	var out []struct {
		Status int
		Error  string
		Seq    uint64
	}
	if err := json.Unmarshal([]byte(res.body), &out); err != nil || res.status != 200 || len(out) != 2 {
		t.Fatalf("batch: %d %s", res.status, res.body)
	}
	if out[0].Status != 400 || out[0].Error != "invalid_json" || out[1].Status != 201 || out[1].Seq != 1 {
		t.Fatalf("batch results %+v", out)
	}
}

// TestEncodedBodyLimit: --max-body bounds what subscribers receive, the body as
// encoded into the envelope, not only the bytes sent.
func TestEncodedBodyLimit(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxBody: 1024}})
	url := p.public.URL + "/rooms/r/events"
	text := []string{"Content-Type", "text/plain"}
	// 300 control characters are 300 bytes sent and 1802 bytes as a JSON string.
	res := do(t, http.MethodPost, url, strings.Repeat("\x01", 300), text...)
	assertError(t, res, 413, "payload_too_large")
	if !strings.Contains(res.body, "encoded") {
		t.Fatalf("the message does not say the encoded size counts: %s", res.body)
	}
	// A body that fits once encoded is published, right up to the limit.
	if res := do(t, http.MethodPost, url, strings.Repeat("x", 1022), text...); res.status != 201 || !strings.Contains(res.body, `"seq":1,`) {
		t.Fatalf("1022 letters (1024 bytes encoded): %d %s", res.status, res.body)
	}
	assertError(t, do(t, http.MethodPost, url, strings.Repeat("x", 1023), text...), 413, "payload_too_large")
	// Characters that are plain in JSON stay one byte: no HTML escaping in an event.
	res = do(t, http.MethodPost, url, strings.Repeat("<&>", 300), text...)
	if res.status != 201 {
		t.Fatalf("900 bytes of <&>: %d %s", res.status, res.body)
	}
	s := p.subscribe(t, "r", "lastEventId=1")
	if f := s.next(); !strings.Contains(f.data, `"body":"<&><&>`) {
		t.Fatalf("event %+v", f)
	}
}

// TestContentEncoding: a body in any encoding but identity is refused before it is read.
func TestContentEncoding(t *testing.T) {
	p := newPod(t, podConfig{})
	ct := []string{"Content-Type", "application/json"}
	for _, enc := range []string{"gzip", "br", "deflate", "identity, gzip", "x-anything"} {
		assertError(t, do(t, http.MethodPost, p.public.URL+"/rooms/r/events", `1`, append([]string{"Content-Encoding", enc}, ct...)...), 415, "unsupported_content_encoding")
		assertError(t, do(t, http.MethodPost, p.public.URL+"/events", `[{"room":"r","body":1}]`, append([]string{"Content-Encoding", enc}, ct...)...), 415, "unsupported_content_encoding")
	}
	for _, enc := range []string{"identity", "Identity"} {
		if res := do(t, http.MethodPost, p.public.URL+"/rooms/r/events", `1`, append([]string{"Content-Encoding", enc}, ct...)...); res.status != 201 {
			t.Fatalf("Content-Encoding %s: %d %s", enc, res.status, res.body)
		}
	}
}
