package gateway

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// FuzzDecodeWSFrame decodes any client message as a frame and, for a hello,
// validates it: nothing panics, and a hello that passes holds only what the
// transport may use (a valid client id, a canonical lower-case UUIDv7 boot no later
// than the bound, sorted distinct valid rooms within the bound, each with a parsed
// resume point).
func FuzzDecodeWSFrame(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"kind":"hello","client":"rig-0414","boot":"0190b2a8-1234-7abc-8def-0123456789ab","rooms":{"orders":"k3x9q:48","alerts":""}}`,
		`{"v":1,"kind":"hello","client":"c","boot":"0190B2A8-1234-7ABC-BDEF-0123456789AB","rooms":{"a":"5"}}`,
		`{"v":1,"kind":"ack","room":"orders","id":"k3x9q:48"}`,
		`{"v":1,"kind":"publish","room":"orders","type":"t","body":{"n":1},"idempotency_key":"k","ref":"r"}`,
		`{"v":1,"kind":"ping","data":[1,2,3]}`,
		`{"v":2,"kind":"hello"}`,
		`{"v":1}`,
		`[1,2]`,
		` {"v":1,"kind":"x","rooms":{"a{b}":""}} `,
		`{"v":1,"kind":"hello","client":"c","boot":"0190b2a8-1234-7abc-8def-0123456789ab","rooms":{"a":"x:1:2"}}`,
		`{"v":1,"kind":"hello","client":"agent-a","boot":"ffffffff-ffff-7fff-bfff-ffffffffffff","rooms":{"public.x":""}}`,
		`{"v":1,"kind":"hello","client":"c","boot":"0190b2a8-1235-7abc-8def-0123456789ab","rooms":{"a":""}}`,
		`{"v":1,"kind":"hello","client":"c","boot":"0190b2a8-1234-7abc-8def-0123456789ab","rooms":{"a":""},"agent":"rig/1.2 (linux)"}`,
		`{"v":1,"kind":"hello","client":"c","boot":"0190b2a8-1234-7abc-8def-0123456789ab","rooms":{"a":""},"agent":"\u0000\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		fr, err := decodeWSFrame(p)
		if err != nil {
			return
		}
		if fr.V != wsVersion || fr.Kind == "" {
			t.Fatalf("decoded %q as %+v", p, fr)
		}
		// An answer naming any kind is valid JSON.
		if !json.Valid(wsErrorOf(fr.Ref, "", newError(0, "unknown_kind", "unknown frame kind "+quoteKind(fr.Kind)))) {
			t.Fatal("error frame is not JSON")
		}
		// The latest boot allowed: the second seed's millisecond.
		latest := time.UnixMilli(0x0190b2a81234)
		h, err := parseHello(fr, 4, latest)
		if err != nil {
			return
		}
		if replay.BootTime(h.boot).After(latest) {
			t.Fatalf("boot %q of %s passed, after %s", h.boot, replay.BootTime(h.boot), latest)
		}
		if !replay.ValidClient(h.client) {
			t.Fatalf("client %q passed", h.client)
		}
		if len(h.agent) > maxAgentLen || strings.ContainsFunc(h.agent, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			t.Fatalf("agent %q passed", h.agent)
		}
		if b, ok := parseBoot(h.boot); !ok || b != h.boot || h.boot != strings.ToLower(h.boot) || h.boot[14] != '7' {
			t.Fatalf("boot %q passed", h.boot)
		}
		if len(h.names) == 0 || len(h.names) > 4 || !slices.IsSorted(h.names) || len(slices.Compact(slices.Clone(h.names))) != len(h.names) {
			t.Fatalf("rooms %q passed", h.names)
		}
		for i, n := range h.names {
			if !replay.ValidRoom(n) {
				t.Fatalf("room %q passed", n)
			}
			if h.resumed[i] != (fr.Rooms[n] != "") {
				t.Fatalf("room %q: resumed %v from %q", n, h.resumed[i], fr.Rooms[n])
			}
		}
	})
}

// FuzzWSEventFrame: an event's WebSocket frame is valid JSON that carries the
// envelope's fields (replay.Event.AppendJSON) and the id, whatever the body's line
// breaks.
func FuzzWSEventFrame(f *testing.F) {
	f.Add("orders", "k3x9q", uint64(48), "message", []byte(`{"n":1}`))
	f.Add("a", "e", uint64(1), "t.x", []byte("{\"a\":\r\n1}"))
	f.Add("a", "e", uint64(1), "t", []byte("\"x\\ny\"\n\n"))
	f.Fuzz(func(t *testing.T, room, epoch string, seq uint64, typ string, body []byte) {
		if !replay.ValidRoom(room) || !replay.ValidType(typ) || epoch == "" || strings.ContainsAny(epoch, ":\r\n\"\\") || !json.Valid(body) {
			return
		}
		for _, c := range []byte(epoch) {
			if c < 0x21 || c > 0x7e {
				return
			}
		}
		ev := replay.Event{Room: room, Epoch: epoch, Seq: seq, TS: 1, Type: typ, Body: body}
		out := wsEventFrame(ev)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("frame %q: %v", out, err)
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal(ev.AppendJSON(nil), &env); err != nil {
			t.Fatalf("envelope: %v", err)
		}
		if string(m["v"]) != "1" || string(m["kind"]) != `"event"` || string(m["id"]) != strconv.Quote(ev.ID()) {
			t.Fatalf("frame %q: v, kind or id", out)
		}
		for k, v := range env {
			var got, want bytes.Buffer
			_ = json.Compact(&got, m[k])
			_ = json.Compact(&want, v)
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("frame %q: field %s is %s, the envelope's %s", out, k, m[k], v)
			}
		}
		if len(m) != len(env)+3 {
			t.Fatalf("frame %q: %d fields, want the envelope's %d and v, kind, id", out, len(m), len(env))
		}
	})
}

// FuzzCloseNotice: a pod notice parses only as "close <client> <session>
// [reconnect]" with a valid client and session, and what parses formats back to
// itself.
func FuzzCloseNotice(f *testing.F) {
	f.Add("close rig-1 abcDEF_-1")
	f.Add("close rig-1 abcDEF_-1 reconnect")
	f.Add("close rig-1 abcDEF_-1 kick")
	f.Add("close  rig-1 x y")
	f.Add("open rig-1 s")
	f.Fuzz(func(t *testing.T, n string) {
		client, session, mode, ok := parseCloseNotice(n)
		if !ok {
			return
		}
		if !replay.ValidClient(client) || !replay.ValidSession(session) || (mode != closeKick && mode != closeReconnect) {
			t.Fatalf("%q parsed as %q %q %v", n, client, session, mode)
		}
		if c2, s2, m2, ok := parseCloseNotice(modeCloseNotice(client, session, mode)); !ok || c2 != client || s2 != session || m2 != mode {
			t.Fatalf("%q does not round-trip", n)
		}
	})
}
