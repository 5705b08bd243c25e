package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway/auth"
)

func TestParsePattern(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"exact", "team-7.a", true},
		{"prefix", "team-7.*", true},
		{"all", "*", true},
		{"every room character", "aZ09._~-", true},
		{"longest exact", strings.Repeat("r", 128), true},
		{"longest prefix", strings.Repeat("r", 128) + "*", true},
		{"empty", "", false},
		{"exact too long", strings.Repeat("r", 129), false},
		{"prefix too long", strings.Repeat("r", 129) + "*", false},
		{"star inside", "team-*.a", false},
		{"two stars", "**", false},
		{"star first", "*a", false},
		{"space", "team 7", false},
		{"brace", "room{x}", false},
		{"slash", "a/b", false},
		{"not ascii", "räum", false},
		{"nul", "a\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := auth.ParsePattern(tt.in)
			if tt.ok {
				if err != nil || string(p) != tt.in {
					t.Fatalf("ParsePattern(%q) = %q, %v; want it back, nil", tt.in, p, err)
				}
				return
			}
			if !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("ParsePattern(%q) error = %v; want one wrapping ErrInvalid", tt.in, err)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern, room string
		want          bool
	}{
		{"team-7.*", "team-7.a", true},
		{"team-7.*", "team-7.a.b", true},
		{"team-7.*", "team-70", false},
		{"team-7.*", "team-7", false},
		{"team-7.a", "team-7.a", true},
		{"team-7.a", "team-7.ab", false},
		{"team-7.a", "team-7.", false},
		{"*", "anything", true},
		{"*", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.room, func(t *testing.T) {
			if got := auth.Pattern(tt.pattern).Match(tt.room); got != tt.want {
				t.Fatalf("Pattern(%q).Match(%q) = %v, want %v", tt.pattern, tt.room, got, tt.want)
			}
		})
	}
}

func TestParseGrants(t *testing.T) {
	g, err := auth.ParseGrants([]string{"team-7.*", "lobby"})
	if err != nil {
		t.Fatal(err)
	}
	for room, want := range map[string]bool{"team-7.a": true, "lobby": true, "team-70": false, "lobby2": false} {
		if got := g.Allows(room); got != want {
			t.Errorf("Allows(%q) = %v, want %v", room, got, want)
		}
	}
	if g, err := auth.ParseGrants(nil); err != nil || len(g) != 0 || g.Allows("x") {
		t.Errorf("ParseGrants(nil) = %v, %v; want empty grants that allow nothing", g, err)
	}
	many := make([]string, 257)
	for i := range many {
		many[i] = "r"
	}
	if _, err := auth.ParseGrants(many[:256]); err != nil {
		t.Errorf("256 grants: %v", err)
	}
	if _, err := auth.ParseGrants(many); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("257 grants: error = %v, want ErrInvalid", err)
	}
	if _, err := auth.ParseGrants([]string{"ok", "bad*x"}); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("a bad entry: error = %v, want ErrInvalid", err)
	}
}

func TestGrantsCover(t *testing.T) {
	g := auth.Grants{"team-*", "u.ana"}
	tests := []struct {
		p    auth.Pattern
		want bool
	}{
		{"team-7.a", true},
		{"team-7.*", true},
		{"team-*", true},
		{"team-", false}, // team-* grants only longer rooms
		{"team*", false},
		{"*", false},
		{"u.ana", true},
		{"u.ana*", false},
		{"u.bob", false},
	}
	for _, tt := range tests {
		if got := g.Covers(tt.p); got != tt.want {
			t.Errorf("%v.Covers(%q) = %v, want %v", g, tt.p, got, tt.want)
		}
	}
	if !(auth.Grants{"*"}).Covers("*") {
		t.Error(`"*" does not cover "*"`)
	}
}
