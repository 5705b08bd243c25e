package size

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "512": 512, "512B": 512, "512 b": 512,
		"64K": 64 << 10, "64k": 64 << 10, "64KB": 64 << 10, "64kb": 64 << 10, "64Ki": 64 << 10, "64KiB": 64 << 10, "64kib": 64 << 10,
		"4M": 4 << 20, "4MB": 4 << 20, "4Mi": 4 << 20, "4MiB": 4 << 20, "1280Mi": 1280 << 20,
		"1GB": 1 << 30, "2 GiB": 2 << 30, "2TiB": 2 << 40, "2tb": 2 << 40, "1PiB": 1 << 50,
		"1.5KiB": 1536, "0.5": 1, " 7 ": 7,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "-1", "+1", "1e3", "inf", "NaN", "0x10", "1..2", ".", "KiB", "B",
		"2PiB", "1.2.3MB", "1 2", "64KiBB", "64 XB", strings.Repeat("9", 65)} {
		if n, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", in, n)
		}
	}
}

func TestParseErrorNamesTheForms(t *testing.T) {
	_, err := Parse("64 bytes")
	if err == nil || !strings.Contains(err.Error(), "KiB") || !strings.Contains(err.Error(), "power of 1024") {
		t.Fatalf("Parse(\"64 bytes\") error %v, want one naming the accepted forms", err)
	}
}

// TestEveryRefusalNamesTheForms: whatever is wrong with a value, the refusal says
// what a size is and gives examples; the examples parse.
func TestEveryRefusalNamesTheForms(t *testing.T) {
	for _, in := range []string{"", "lots", "-1", "1e3", "64 XB", "1..2", "KiB", strings.Repeat("9", 65)} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), Forms) || !strings.Contains(err.Error(), "e.g. "+Examples) {
			t.Errorf("Parse(%q) error %v, want one naming the forms and the examples", in, err)
		}
	}
	if _, err := Parse("2PiB"); err == nil || !strings.Contains(err.Error(), "more than 1PiB") {
		t.Errorf("Parse(\"2PiB\") error %v, want one naming the largest size", err)
	}
	for _, ex := range strings.Split(strings.ReplaceAll(Examples, " or ", ", "), ", ") {
		if _, err := Parse(ex); err != nil {
			t.Errorf("the example %q does not parse: %v", ex, err)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1000: "1000", 1024: "1KiB", 64 << 10: "64KiB", 3 << 20: "3MiB",
		1 << 40: "1TiB", 1<<40 + 1: "1099511627777", 1 << 50: "1PiB"} {
		got := Format(n)
		if got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
		if back, err := Parse(got); err != nil || back != n {
			t.Errorf("Parse(Format(%d)) = %d, %v", n, back, err)
		}
	}
}

// FuzzParse feeds Parse anything: it answers within 0..Max or errs, and what it
// accepts Format writes back to the same count.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1280Mi", "1.5GB", "64kb", "2TiB", "", "-", "1e9", "...", "0.0001KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			return
		}
		if n < 0 || n > Max {
			t.Fatalf("Parse(%q) = %d, out of range", s, n)
		}
		if back, err := Parse(Format(n)); err != nil || back != n {
			t.Fatalf("Parse(Format(%d)) = %d, %v", n, back, err)
		}
	})
}
