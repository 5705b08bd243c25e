package gatewaytest

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// FlagRow is one flag as a row of a markdown flag table names it, with the default
// the row gives it.
type FlagRow struct {
	Name string // without dashes
	// Default is the row's default cell without backquotes, or the flag's share of
	// it when the row names several flags ("3s, 6s"); "" when the shares do not match.
	Default string
	Line    int // in the file, from 1
}

// flagNameRE finds the flags a row's first cell names: `--name` or `-name`, with
// an argument after a space or not.
var flagNameRE = regexp.MustCompile("`--?([a-z0-9-]+)[ `]")

// FlagTable returns the rows of the first table with a column headed "default" in
// the section under heading (a whole line, such as "## Configuration") of the
// markdown file at path: every flag a row's first cell names, with its share of the
// default column.
func FlagTable(path, heading string) ([]FlagRow, error) {
	lines, first, err := MarkdownSection(path, heading)
	if err != nil {
		return nil, err
	}
	var out []FlagRow
	defCol := -1
	inTable := false
	for i, line := range lines {
		if strings.HasPrefix(line, "#") {
			break // the section ended
		}
		if !strings.HasPrefix(line, "|") {
			if defCol >= 0 {
				break // the flag table ended
			}
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		if !inTable {
			inTable = true
			defCol = slices.Index(cells, "default") // -1: another table, passed over
			continue
		}
		if defCol < 0 {
			continue
		}
		if len(cells) <= defCol {
			continue // the rule under the header, or a short row
		}
		names := flagNameRE.FindAllStringSubmatch(cells[0], -1)
		defs := strings.Split(cells[defCol], ", ")
		for k, m := range names {
			def := ""
			if len(defs) == len(names) {
				def = strings.Trim(defs[k], "`")
			}
			out = append(out, FlagRow{Name: m[1], Default: def, Line: first + i})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no flag table under %q", path, heading)
	}
	return out, nil
}

// CheckFlagTable compares the flags of fs with rows: every flag has one row, every
// row names a flag, and a row's default, read by the flag's own parser on a flag of
// fresh() (a FlagSet like fs, whose values it may change), is the flag's default.
// "empty" and "none" stand for an empty default, "off" for false. A default the
// parser refuses or reads otherwise must be a phrase ("a tenth of --max-x"), never
// one mistyped word. It returns what differs.
func CheckFlagTable(fs *flag.FlagSet, rows []FlagRow, fresh func() *flag.FlagSet) []error {
	var errs []error
	documented := map[string]bool{}
	for _, r := range rows {
		if documented[r.Name] {
			errs = append(errs, fmt.Errorf("line %d: --%s has a second row", r.Line, r.Name))
		}
		documented[r.Name] = true
		f := fs.Lookup(r.Name)
		if f == nil {
			errs = append(errs, fmt.Errorf("line %d: the table names --%s, which does not exist", r.Line, r.Name))
			continue
		}
		if r.Default == "" {
			continue // a row for several flags whose defaults are one phrase
		}
		if err := checkDefault(f, fresh().Lookup(r.Name).Value, r.Default); err != nil {
			errs = append(errs, fmt.Errorf("line %d: --%s: %w", r.Line, r.Name, err))
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !documented[f.Name] {
			errs = append(errs, fmt.Errorf("--%s has no row in the table", f.Name))
		}
	})
	return errs
}

// checkDefault reads def with v, a fresh value of f, and compares it with f's
// default.
func checkDefault(f *flag.Flag, v flag.Value, def string) error {
	word, _, _ := strings.Cut(def, " ")
	switch word {
	case "empty", "none":
		if f.DefValue != "" {
			return fmt.Errorf("the table says %s, the default is %q", word, f.DefValue)
		}
		return nil
	case "off":
		def = "false"
	}
	if err := v.Set(def); err != nil {
		if !strings.Contains(def, " ") {
			return fmt.Errorf("the table's default %q is not a value of the flag: %w", def, err)
		}
		return nil // described in words
	}
	if got := v.String(); got != f.DefValue && !strings.Contains(def, " ") {
		return fmt.Errorf("the table's default %q reads as %q, the default is %q", def, got, f.DefValue)
	}
	return nil
}

// MarkdownSection returns the lines of the section of the Markdown file at path under
// heading (a whole line, such as "## Configuration"): from the line after it to the
// next heading of the same or a higher level outside a fenced block. first is the
// line number (from 1) of lines[0] in the file.
func MarkdownSection(path, heading string) (lines []string, first int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	all := strings.Split(string(b), "\n")
	start := slices.Index(all, heading)
	if start < 0 {
		return nil, 0, fmt.Errorf("%s has no heading %q", path, heading)
	}
	level := strings.Index(heading, " ")
	lines, first = all[start+1:], start+2
	inFence := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if l := strings.Index(line, " "); !inFence && l > 0 && l <= level && strings.Trim(line[:l], "#") == "" {
			return lines[:i], first, nil
		}
	}
	return lines, first, nil
}
