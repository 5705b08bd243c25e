// Package size reads and writes the byte counts that roomcast's commands take as
// flags: one rule for the gateway, roomcastctl and the load generator.
//
// A size is a non-negative decimal number with an optional unit. Every unit is a
// power of 1024 and its case does not matter: K, KB, Ki and KiB all mean 1024
// bytes; M, MB, Mi and MiB 1024²; then G, T and P likewise; B, or no unit, means
// bytes. A fraction is rounded to whole bytes (1.5KiB is 1536). At most 1PiB.
package size

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Max is the largest size Parse accepts: 1PiB.
const Max = 1 << 50

// maxLen bounds a value before it is parsed.
const maxLen = 64

// Forms names the accepted forms, for flag help and error messages.
const Forms = "a number of bytes with an optional unit B, KiB, MiB, GiB, TiB or PiB " +
	"(K, KB and Ki mean KiB, and so on: every unit is a power of 1024; case does not matter)"

// Examples are sizes Parse accepts, for error messages.
const Examples = "65536, 64KiB, 512MiB or 1.5GiB"

var errSyntax = errors.New("write " + Forms + ", e.g. " + Examples)

// units in the order they are tried: longer suffixes first.
var units = []struct {
	suffix string
	shift  uint
}{
	{"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40}, {"pib", 50},
	{"ki", 10}, {"mi", 20}, {"gi", 30}, {"ti", 40}, {"pi", 50},
	{"kb", 10}, {"mb", 20}, {"gb", 30}, {"tb", 40}, {"pb", 50},
	{"k", 10}, {"m", 20}, {"g", 30}, {"t", 40}, {"p", 50},
	{"b", 0},
}

// Parse reads a size (see the package doc).
func Parse(s string) (int64, error) {
	if len(s) > maxLen {
		return 0, fmt.Errorf("a size of %d characters is too long: write %s, e.g. %s", len(s), Forms, Examples)
	}
	num, shift := strings.TrimSpace(s), uint(0)
	lower := strings.ToLower(num)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			num, shift = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.shift
			break
		}
	}
	v, err := parseNumber(num)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %w", s, err)
	}
	b := math.Round(v * float64(uint64(1)<<shift))
	if b > Max {
		return 0, fmt.Errorf("size %q is more than 1PiB", s)
	}
	return int64(b), nil
}

// parseNumber reads a finite, non-negative decimal number: digits with at most one
// point, no sign, exponent, hex, inf or nan (flags are written by people).
func parseNumber(s string) (float64, error) {
	if s == "" || s == "." || strings.Trim(s, "0123456789.") != "" || strings.Count(s, ".") > 1 {
		return 0, errSyntax
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errSyntax
	}
	return v, nil
}

// Format writes n in the largest binary unit that divides it (64KiB, 3MiB), or in
// bytes (1000).
func Format(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"PiB", 50}, {"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if size := int64(1) << u.shift; n >= size && n%size == 0 {
			return strconv.FormatInt(n/size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
