package wire

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// A multiplexed stream follows several rooms at once; its resume point is a token
// holding one position per room:
//
//	token = "m1." set *( "." pos )   one pos per room, in sorted room order
//	set   = FNV-1a 32 of the sorted distinct room names joined by "\n", base 36
//	pos   = "" / seq / epoch ":" seq
//	seq   = 1*13 base-36 digits [0-9a-z]
//
// An empty pos stands for the room's start anchor: the stream begins that room live,
// from where it joined, with no history read. A bare seq means the room's current
// epoch, as in a single-room id. The set binds a token to its rooms: a token of
// another room set, or with a position count other than the room count, is refused.

// ErrBadToken is returned by ParseToken for a malformed token, or one of another
// room set.
var ErrBadToken = errors.New("replay: malformed or foreign resume token")

// tokenPrefix opens every token; it names the grammar's version.
const tokenPrefix = "m1."

// MaxTokenLen bounds a token's length in bytes: 64 rooms with 32-character epochs
// and the largest seqs fit.
const MaxTokenLen = 4096

// maxSeq36 bounds a seq's base-36 digits: 13 hold every uint64.
const maxSeq36 = 13

// RoomSetHash is the FNV-1a 32 hash of rooms (sorted and distinct) joined by "\n".
func RoomSetHash(rooms []string) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i, r := range rooms {
		if i > 0 {
			h ^= '\n'
			h *= prime
		}
		for j := 0; j < len(r); j++ {
			h ^= uint32(r[j])
			h *= prime
		}
	}
	return h
}

// AppendTokenHead appends a token's fixed part for rooms: the prefix and the set.
// Append each room's position with AppendTokenPos, in the same order.
func AppendTokenHead(dst []byte, rooms []string) []byte {
	dst = append(dst, tokenPrefix...)
	return strconv.AppendUint(dst, uint64(RoomSetHash(rooms)), 36)
}

// AppendTokenPos appends one room's position to a token; anchored (no position yet:
// the room's start anchor) appends an empty one.
func AppendTokenPos(dst []byte, p Position, anchored bool) []byte {
	dst = append(dst, '.')
	if anchored {
		return dst
	}
	if p.Epoch != "" {
		dst = append(dst, p.Epoch...)
		dst = append(dst, ':')
	}
	return strconv.AppendUint(dst, p.Seq, 36)
}

// FormatToken returns the token of rooms (sorted and distinct) at pos; a room whose
// anchored entry is true gets an empty position.
func FormatToken(rooms []string, pos []Position, anchored []bool) string {
	b := AppendTokenHead(make([]byte, 0, 16+20*len(rooms)), rooms)
	for i := range rooms {
		b = AppendTokenPos(b, pos[i], anchored[i])
	}
	return string(b)
}

// ParseToken parses a token for rooms (sorted and distinct): each room's position,
// and whether it is empty (the room's start anchor). Surrounding spaces are ignored.
// A seq past uint64 reads as the largest uint64, past every head, as in
// ParsePosition.
func ParseToken(s string, rooms []string) ([]Position, []bool, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxTokenLen || len(rooms) == 0 {
		return nil, nil, ErrBadToken
	}
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return nil, nil, ErrBadToken
	}
	set, rest, _ := strings.Cut(rest, ".")
	h, ok := parseBase36(set, 7)
	if !ok || h != uint64(RoomSetHash(rooms)) || strings.Count(s, ".") != len(rooms)+1 {
		return nil, nil, ErrBadToken
	}
	pos := make([]Position, len(rooms))
	anchored := make([]bool, len(rooms))
	for i := range rooms {
		var part string
		part, rest, _ = strings.Cut(rest, ".")
		if part == "" {
			anchored[i] = true
			continue
		}
		epoch, seqText, found := strings.Cut(part, ":")
		if !found {
			epoch, seqText = "", part
		} else if !ValidEpoch(epoch) {
			return nil, nil, ErrBadToken
		}
		seq, ok := parseBase36(seqText, maxSeq36)
		if !ok {
			return nil, nil, ErrBadToken
		}
		pos[i] = Position{Epoch: epoch, Seq: seq}
	}
	return pos, anchored, nil
}

// parseBase36 parses 1..maxDigits lowercase base-36 digits; a value past uint64
// saturates.
func parseBase36(s string, maxDigits int) (uint64, bool) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'z':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		if n > (math.MaxUint64-d)/36 {
			n = math.MaxUint64
			continue
		}
		n = n*36 + d
	}
	return n, true
}
