package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// durationForms names the values a duration flag accepts: Go durations. A day is
// not a unit of them, so the message says how to write one rather than naming it.
const durationForms = "write a number and a unit (ms, s, m or h), e.g. 90s, 15m, 24h or 1h30m; a day is 24h"

// explainParse turns an error of FlagSet.Parse into the gateway's form: the flag
// with two dashes, then what is wrong with its value and what the flag accepts.
// Errors it does not recognise keep their text, with flags given two dashes.
func explainParse(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	// The flag package writes: invalid value "v" for flag -name: cause
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if quoted, qerr := strconv.QuotedPrefix(rest); qerr == nil {
			value, _ := strconv.Unquote(quoted)
			if rest, ok := strings.CutPrefix(rest[len(quoted):], " for flag -"); ok {
				if name, cause, ok := strings.Cut(rest, ": "); ok {
					if f := fs.Lookup(name); f != nil {
						return refusal(f, value, cause, nil)
					}
				}
			}
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Errorf("unknown flag --%s (gateway -h lists every flag)", strings.TrimLeft(name, "-"))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("--%s needs a value", strings.TrimLeft(name, "-"))
	}
	return errors.New(strings.Replace(msg, "for flag -", "for flag --", 1))
}

// refusal says why value, given to f by flag or (fromEnv) by its environment twin,
// was refused: cause as the flag's parser gave it, rephrased to name the forms the
// flag accepts, and the flag's range when it has one.
func refusal(f *flag.Flag, value, cause string, fromEnv map[string]bool) error {
	what := cause
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			what = fmt.Sprintf("%q is not a duration: %s", value, durationForms)
			n := strings.TrimSpace(value)
			if days, ok := strings.CutSuffix(n, "d"); ok {
				if d, err := strconv.ParseFloat(days, 64); err == nil && d >= 0 && d <= 1e6 {
					what = fmt.Sprintf("%q: a day is not a unit of durations: write %sh", value, strconv.FormatFloat(d*24, 'f', -1, 64))
				}
			} else if n != "" && strings.Trim(n, "0123456789.") == "" {
				what = fmt.Sprintf("%q has no unit: write e.g. %ss or %sms (units ms, s, m or h)", value, n, n)
			}
		case byteSize:
			// size.Parse names the accepted forms itself.
		case int, uint64:
			what = fmt.Sprintf("%q is not a whole number", value)
		case float64:
			what = fmt.Sprintf("%q is not a number", value)
		case bool:
			what = fmt.Sprintf("%q is not true or false", value)
		}
		if cause == "value out of range" {
			what = fmt.Sprintf("%q is out of range", value)
		}
	}
	if b, ok := ranges[f.Name]; ok {
		what += "; the flag must be " + describe(f.Value, b)
	}
	return fmt.Errorf("%s: %s", flagRef(f.Name, fromEnv), what)
}
