package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/wire"
)

func TestParseTTL(t *testing.T) {
	max := 24 * time.Hour
	cases := []struct {
		in   string
		want time.Duration
		long bool // refused as longer than max
	}{
		{"30s", 30 * time.Second, false},
		{"5m", 5 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"1.5s", 1500 * time.Millisecond, false},
		{"1ms", time.Millisecond, false},
		{"90", 90 * time.Second, false},
		{"86400", max, false},
		{"24h", max, false},
		{"86401", 0, true},
		{"25h", 0, true},
		{"999999999999", 0, true},
		{"", 0, false},
		{"0", 0, false},
		{"0s", 0, false},
		{"-5s", 0, false},
		{"-5", 0, false},
		{"999us", 0, false},
		{"1d", 0, false},
		{"5 m", 0, false},
		{" 30s", 0, false},
		{"1e3", 0, false},
		{"9999999999999", 0, true},
		{"99999999999999999999999", 0, false},
		{"30s\n", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, aerr := parseTTL(tc.in, max)
			switch {
			case tc.want != 0:
				if aerr != nil || got != tc.want {
					t.Fatalf("parseTTL(%q) = %s, %v; want %s", tc.in, got, aerr, tc.want)
				}
			case aerr == nil || aerr.Code != "invalid_ttl" || aerr.Status != 400:
				t.Fatalf("parseTTL(%q) = %s, %v; want 400 invalid_ttl", tc.in, got, aerr)
			case tc.long != (aerr != errBadTTL):
				t.Fatalf("parseTTL(%q): %q; want the too-long message %v", tc.in, aerr.Message, tc.long)
			}
		})
	}
}

func TestParseTTLField(t *testing.T) {
	for raw, want := range map[string]time.Duration{
		``: 0, `null`: 0, `"30s"`: 30 * time.Second, `90`: 90 * time.Second, ` "1m" `: time.Minute,
	} {
		if got, aerr := parseTTLField(json.RawMessage(raw), time.Hour); aerr != nil || got != want {
			t.Errorf("parseTTLField(%s) = %s, %v; want %s", raw, got, aerr, want)
		}
	}
	for _, raw := range []string{`30.5`, `-1`, `true`, `{}`, `["30s"]`, `"90`, `""`, `"2h"`, `7200`} {
		if got, aerr := parseTTLField(json.RawMessage(raw), time.Hour); aerr == nil || aerr.Code != "invalid_ttl" {
			t.Errorf("parseTTLField(%s) = %s, %v; want invalid_ttl", raw, got, aerr)
		}
	}
}

// FuzzParseTTL: whatever a publisher sends as a TTL is either refused with
// invalid_ttl or is between 1ms and the bound; whole seconds mean seconds, and a
// TTL it accepts reads back the same from its Go spelling.
func FuzzParseTTL(f *testing.F) {
	for _, s := range []string{"30s", "5m", "90", "0", "-1s", "1.5h", "86401", "1ms", "999999999999", "1e9", "\x00", "9223372036s"} {
		f.Add(s)
	}
	const max = 24 * time.Hour
	f.Fuzz(func(t *testing.T, s string) {
		d, aerr := parseTTL(s, max)
		if aerr != nil {
			if aerr.Code != "invalid_ttl" || aerr.Status != 400 || d != 0 {
				t.Fatalf("parseTTL(%q): %d %s, %s", s, aerr.Status, aerr.Code, d)
			}
			return
		}
		if d < minTTL || d > max {
			t.Fatalf("parseTTL(%q) = %s: outside 1ms..%s", s, d, max)
		}
		if n, ok := wire.ParseSeq(s); ok && d != time.Duration(n)*time.Second {
			t.Fatalf("parseTTL(%q) = %s, want %d seconds", s, d, n)
		}
		if again, aerr := parseTTL(d.String(), max); aerr != nil || again != d {
			t.Fatalf("parseTTL(%q) = %s, which reads back as %s, %v", s, d, again, aerr)
		}
	})
}
