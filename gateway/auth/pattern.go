package auth

import (
	"fmt"
	"strings"
)

// maxRoom is the longest room name (DESIGN §3), and so the longest exact pattern and
// the longest prefix before a trailing "*".
const maxRoom = 128

// maxGrants bounds the patterns of one grant list.
const maxGrants = 256

// Pattern is one grant: an exact room name, or a prefix ending in "*" ("team-7.*",
// "*" for all). A prefix matches every room that starts with it and is longer than it.
type Pattern string

// ParsePattern checks s: the part before a trailing "*" is room characters
// [A-Za-z0-9._~-], at most 128 of them; "*" appears only at the end; s is not empty.
// Errors wrap ErrInvalid.
func ParsePattern(s string) (Pattern, error) { return parsePattern(s, isRoomChar, "[A-Za-z0-9._~-]") }

// ParseClientPattern checks a pattern of WebSocket client ids as ParsePattern checks
// one of rooms, with the characters of a client id, [A-Za-z0-9._~:-] ("anon:*").
func ParseClientPattern(s string) (Pattern, error) {
	return parsePattern(s, isClientChar, "[A-Za-z0-9._~:-]")
}

// parsePattern checks s: the part before a trailing "*" is at most 128 bytes that
// isChar accepts (chars describes them); "*" appears only at the end; s is not empty.
func parsePattern(s string, isChar func(byte) bool, chars string) (Pattern, error) {
	if s == "" {
		return "", fmt.Errorf("auth: pattern: empty: %w", ErrInvalid)
	}
	prefix, wild := strings.CutSuffix(s, "*")
	if len(prefix) > maxRoom {
		return "", fmt.Errorf("auth: pattern %.32q...: longer than %d characters: %w", s, maxRoom, ErrInvalid)
	}
	if !wild && prefix == "" {
		return "", fmt.Errorf("auth: pattern: empty: %w", ErrInvalid)
	}
	for i := 0; i < len(prefix); i++ {
		if !isChar(prefix[i]) {
			return "", fmt.Errorf("auth: pattern %q: character %d is not one of %s (a \"*\" may only end it): %w", s, i, chars, ErrInvalid)
		}
	}
	return Pattern(s), nil
}

// Match reports whether the pattern covers room.
func (p Pattern) Match(room string) bool {
	if prefix, wild := strings.CutSuffix(string(p), "*"); wild {
		return len(room) > len(prefix) && strings.HasPrefix(room, prefix)
	}
	return p != "" && string(p) == room
}

// Grants is a list of patterns; it allows a room when any of them matches.
type Grants []Pattern

// ParseGrants parses each entry with ParsePattern; at most 256 entries. An empty or
// nil list is an empty Grants, which allows nothing. Errors wrap ErrInvalid.
func ParseGrants(list []string) (Grants, error) { return parseGrants(list, maxGrants, ParsePattern) }

// ParseClientGrants is ParseGrants for patterns of client ids (ParseClientPattern).
func ParseClientGrants(list []string) (Grants, error) {
	return parseGrants(list, maxGrants, ParseClientPattern)
}

// parseGrants is ParseGrants with a bound of max entries, each parsed by parse.
func parseGrants(list []string, max int, parse func(string) (Pattern, error)) (Grants, error) {
	if len(list) > max {
		return nil, fmt.Errorf("auth: grants: %d patterns, at most %d: %w", len(list), max, ErrInvalid)
	}
	g := make(Grants, 0, len(list))
	for _, s := range list {
		p, err := parse(s)
		if err != nil {
			return nil, err
		}
		g = append(g, p)
	}
	return g, nil
}

// Allows reports whether any pattern of g matches room.
func (g Grants) Allows(room string) bool {
	for _, p := range g {
		if p.Match(room) {
			return true
		}
	}
	return false
}

// Covers reports whether g grants every room p grants: an exact room that g allows,
// or a prefix pattern that lies within one of g's prefix patterns.
func (g Grants) Covers(p Pattern) bool {
	prefix, isPrefix := strings.CutSuffix(string(p), "*")
	if !isPrefix {
		return g.Allows(prefix)
	}
	for _, have := range g {
		if hp, ok := strings.CutSuffix(string(have), "*"); ok && strings.HasPrefix(prefix, hp) {
			return true
		}
	}
	return false
}

// strings returns the patterns as strings, for storage.
func (g Grants) strings() []string {
	s := make([]string, len(g))
	for i, p := range g {
		s[i] = string(p)
	}
	return s
}

func isRoomChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '~' || c == '-'
}

func isClientChar(c byte) bool { return isRoomChar(c) || c == ':' }
