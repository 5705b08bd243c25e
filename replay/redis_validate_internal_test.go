package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestEntryEvent(t *testing.T) {
	ok := []string{"epoch", "e1", "ts", "1700000000000", "type", "chat", "body", `{"a":1}`}
	with := func(k, v string) []string {
		f := append([]string(nil), ok...)
		for i := 0; i < len(f); i += 2 {
			if f[i] == k {
				f[i+1] = v
			}
		}
		return f
	}
	cases := []struct {
		name   string
		id     string
		fields []string
		ok     bool
	}{
		{"valid", "7-0", ok, true},
		{"default type", "7-0", with("type", ""), true},
		{"id without -0", "7-1", ok, false},
		{"id not a number", "x-0", ok, false},
		{"seq zero", "0-0", ok, false},
		{"seq 16 digits", "1000000000000000-0", ok, false},
		{"other epoch", "7-0", with("epoch", "e2"), false},
		{"no ts", "7-0", with("ts", ""), false},
		{"ts negative", "7-0", with("ts", "-1"), false},
		{"reserved type", "7-0", with("type", "reauth"), false},
		{"type with newline", "7-0", with("type", "a\nb"), false},
		{"body empty", "7-0", with("body", ""), false},
		{"body not JSON", "7-0", with("body", "{"), false},
		{"body with raw newline", "7-0", with("body", "[1,\n2]"), false},
		{"odd field count", "7-0", append(append([]string(nil), ok...), "x"), false},
		{"deadline", "7-0", append(append([]string(nil), ok...), "exp", "1700000060000"), true},
		{"deadline zero", "7-0", append(append([]string(nil), ok...), "exp", "0"), false},
		{"deadline not a number", "7-0", append(append([]string(nil), ok...), "exp", "soon"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := entryEvent("r", "e1", tc.id, tc.fields)
			if (err == nil) != tc.ok {
				t.Fatalf("entryEvent(%q, %q) = %+v, %v; want ok %v", tc.id, tc.fields, ev, err, tc.ok)
			}
		})
	}
}

func FuzzEntryEvent(f *testing.F) {
	f.Add("7-0", "e1", "1700000000000", "chat", `{"a":1}`)
	f.Add("1-0", "e1", "1", "", `"x"`)
	f.Add("2-0", "e1", "5", "resync", `{}`)
	f.Fuzz(func(t *testing.T, id, epoch, ts, typ, body string) {
		ev, err := entryEvent("r", "e1", id, []string{"epoch", epoch, "ts", ts, "type", typ, "body", body})
		if err != nil {
			return
		}
		env := ev.AppendJSON(nil)
		if ev.Epoch != "e1" || ev.Seq == 0 || ev.Seq > MaxSeq || ev.TS <= 0 || (ev.Type != "" && !ValidType(ev.Type)) ||
			!json.Valid(env) || bytes.ContainsAny(env, "\r\n") || strings.ContainsAny(ev.Type, "\r\n\x00") {
			t.Fatalf("accepted %q %q %q %q %q as %+v", id, epoch, ts, typ, body, ev)
		}
	})
}
