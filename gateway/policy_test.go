package gateway_test

import (
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/rooms"
)

func TestParseRoomPolicies(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want map[string]rooms.Policy // room → policy
		err  string
	}{
		{name: "none", in: nil, want: map[string]rooms.Policy{"a": rooms.PolicyClose}},
		{
			name: "prefixes and names",
			in:   []string{"ticker.*=latest", " feed.* = drop-oldest ", "feed.vip=close", "feed.v*=latest"},
			want: map[string]rooms.Policy{
				"ticker.eur": rooms.PolicyLatest, "ticker.": rooms.PolicyClose, "ticker": rooms.PolicyClose,
				"feed.news": rooms.PolicyDropOldest, "feed.vip": rooms.PolicyClose, "feed.vips": rooms.PolicyLatest,
				"lobby": rooms.PolicyClose,
			},
		},
		{
			name: "a name beats a prefix of its length",
			in:   []string{"ab=drop-oldest", "a*=latest"},
			want: map[string]rooms.Policy{"ab": rooms.PolicyDropOldest, "ac": rooms.PolicyLatest},
		},
		{name: "every room", in: []string{"*=latest"}, want: map[string]rooms.Policy{"x": rooms.PolicyLatest}},
		{name: "no equals sign", in: []string{"ticker.*"}, err: "want pattern=policy"},
		{name: "bad policy", in: []string{"ticker.*=newest"}, err: "want close, latest or drop-oldest"},
		{name: "bad pattern", in: []string{"tick*er=latest"}, err: "character 4"},
		{name: "empty pattern", in: []string{"=latest"}, err: "empty"},
		{name: "twice", in: []string{"a*=latest", "a*=close"}, err: "given twice"},
		{name: "too many", in: make([]string, 257), err: "at most 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := gateway.ParseRoomPolicies(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseRoomPolicies(%q) error %v, want one containing %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for room, want := range tc.want {
				if got := ps.For(room); got != want {
					t.Errorf("For(%q) = %s, want %s", room, got, want)
				}
			}
			again, err := gateway.ParseRoomPolicies(strings.Split(ps.String(), ","))
			if len(ps) > 0 && (err != nil || again.String() != ps.String()) {
				t.Fatalf("String %q parses back as %q (%v)", ps.String(), again.String(), err)
			}
		})
	}
}

// FuzzParseRoomPolicies: any entry either fails with an error or parses into an
// entry whose String parses back to itself, and For never panics.
func FuzzParseRoomPolicies(f *testing.F) {
	for _, s := range []string{"ticker.*=latest", "feed.*=drop-oldest", "a=close", "*=latest", "=", "a=", "*", "a*b=latest", "a==latest"} {
		f.Add(s, "ticker.x")
	}
	f.Fuzz(func(t *testing.T, entry, room string) {
		ps, err := gateway.ParseRoomPolicies([]string{entry})
		if err != nil {
			if ps != nil {
				t.Fatalf("ParseRoomPolicies(%q) returned %v with its error", entry, ps)
			}
			return
		}
		again, err := gateway.ParseRoomPolicies([]string{ps.String()})
		if err != nil || again.String() != ps.String() {
			t.Fatalf("entry %q: String %q parses back as %q (%v)", entry, ps.String(), again.String(), err)
		}
		if p := ps.For(room); p >= rooms.NumPolicies {
			t.Fatalf("For(%q) = %d", room, p)
		}
	})
}
