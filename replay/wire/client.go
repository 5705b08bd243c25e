package wire

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Client ids name WebSocket clients; a client names the process it runs in with a
// boot, a UUIDv7 made once per process start; the gateway names each connection with
// a session.

// Bounds of client ids and sessions.
const (
	MaxClientLen  = 128 // bytes of [A-Za-z0-9._~:-]
	MaxSessionLen = 64  // bytes of [A-Za-z0-9_-]
)

// ErrBadBoot: a boot id is not a UUIDv7 in its canonical text form.
var ErrBadBoot = errors.New("replay: boot id is not a UUIDv7")

// ValidClient reports whether id matches [A-Za-z0-9._~:-]{1,128}: safe inside a
// Redis hash tag.
func ValidClient(id string) bool {
	return validChars(id, MaxClientLen, "._~:-")
}

// ValidSession reports whether id matches [A-Za-z0-9_-]{1,64}.
func ValidSession(id string) bool {
	return validChars(id, MaxSessionLen, "_-")
}

// validChars reports whether s is 1 to max bytes of ASCII letters, digits and the
// bytes in extra.
func validChars(s string, max int, extra string) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		ok := false
		for j := 0; j < len(extra); j++ {
			ok = ok || c == extra[j]
		}
		if !ok {
			return false
		}
	}
	return true
}

// ParseBoot checks a boot id and returns its canonical form: a UUIDv7 as 36
// characters, 8-4-4-4-12 hex digits, version nibble 7, variant bits 10. Upper-case
// hex is accepted and returned in lower case. Anything else is ErrBadBoot.
//
// Boots compare as UUIDv7s: by their 48-bit Unix millisecond timestamp, then the
// rest, which is the byte order of the canonical form (CompareBoots).
func ParseBoot(s string) (string, error) {
	if len(s) != 36 {
		return "", fmt.Errorf("replay: boot of %d bytes: %w", len(s), ErrBadBoot)
	}
	var b [36]byte
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", fmt.Errorf("replay: boot: no dash at %d: %w", i, ErrBadBoot)
			}
			b[i] = c
			continue
		}
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			c += 'a' - 'A'
		default:
			return "", fmt.Errorf("replay: boot: not a hex digit at %d: %w", i, ErrBadBoot)
		}
		b[i] = c
	}
	if b[14] != '7' {
		return "", fmt.Errorf("replay: boot: version %c, want 7: %w", b[14], ErrBadBoot)
	}
	if v := b[19]; v != '8' && v != '9' && v != 'a' && v != 'b' {
		return "", fmt.Errorf("replay: boot: variant nibble %c, want 8 to b: %w", v, ErrBadBoot)
	}
	return string(b[:]), nil
}

// CompareBoots orders two canonical boots (ParseBoot's result): -1 when a is older,
// 0 when they are equal, +1 when a is newer.
func CompareBoots(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BootTime returns the Unix millisecond timestamp a canonical boot (ParseBoot's
// result) carries in its first 48 bits.
func BootTime(boot string) time.Time {
	ms, _ := strconv.ParseInt(boot[0:8]+boot[9:13], 16, 64) // 12 hex digits: never fails on a canonical boot
	return time.UnixMilli(ms)
}

// NewBoot returns a fresh UUIDv7 for at (its Unix millisecond timestamp), the rest
// random: what a client makes once per process start.
func NewBoot(at time.Time) string {
	var u [16]byte
	_, _ = rand.Read(u[6:]) // never fails (crypto/rand)
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], u[10:16])
	return string(s[:])
}
