package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxValueLen bounds a flag value before it is parsed.
const maxValueLen = 64

var errTooLong = errors.New("value too long")

// ParseRate reads a publish rate: events per second over all rooms ("5000",
// "5000/s") or per room ("0.5/room"). perRoom reports the second form.
func ParseRate(s string) (rate float64, perRoom bool, err error) {
	if len(s) > maxValueLen {
		return 0, false, errTooLong
	}
	num := strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(num, "/room"); ok {
		num, perRoom = n, true
	} else if n, ok := strings.CutSuffix(num, "/s"); ok {
		num = n
	}
	v, err := parseNumber(strings.TrimSpace(num))
	if err != nil {
		return 0, false, fmt.Errorf("rate %q: %w", s, err)
	}
	if v > maxRate {
		return 0, false, fmt.Errorf("rate %q: more than %g events/s", s, float64(maxRate))
	}
	return v, perRoom, nil
}

// ParseMembers reads members per room: "N" or a range "LO-HI" (each count in it
// equally likely), 1..10,000,000.
func ParseMembers(s string) (lo, hi int, err error) {
	if len(s) > maxValueLen {
		return 0, 0, errTooLong
	}
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if lo, err = parseCount(a); err != nil {
		return 0, 0, fmt.Errorf("members %q: %w", s, err)
	}
	hi = lo
	if isRange {
		if hi, err = parseCount(b); err != nil {
			return 0, 0, fmt.Errorf("members %q: %w", s, err)
		}
	}
	if lo < 1 || hi > maxMembers || lo > hi {
		return 0, 0, fmt.Errorf("members %q: want 1..%d, or LO-HI with LO <= HI", s, maxMembers)
	}
	return lo, hi, nil
}

func parseCount(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("want a whole number")
	}
	return strconv.Atoi(s)
}

// parseNumber reads a finite, non-negative decimal number (no exponent, hex, inf
// or nan: flags are written by people).
func parseNumber(s string) (float64, error) {
	if s == "" || strings.Trim(s, "0123456789.") != "" || strings.Count(s, ".") > 1 || s == "." {
		return 0, errors.New("want a non-negative decimal number")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New("want a non-negative decimal number")
	}
	return v, nil
}
