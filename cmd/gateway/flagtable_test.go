package main

import (
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

func newTestFlagSet() *flag.FlagSet { return newFlagSet(new(config)) }

// readmeFlags returns the rows of the Configuration table in cmd/gateway/README.md.
func readmeFlags(t *testing.T) []gatewaytest.FlagRow {
	t.Helper()
	rows, err := gatewaytest.FlagTable("README.md", "## Configuration")
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestREADMEFlagTable: the Configuration table of cmd/gateway/README.md and the
// gateway's FlagSet name the same flags, with the same defaults.
func TestREADMEFlagTable(t *testing.T) {
	for _, err := range gatewaytest.CheckFlagTable(newTestFlagSet(), readmeFlags(t), newTestFlagSet) {
		t.Error(err)
	}
}

// TestFlagTableCheckFails: the check finds a flag the table lacks, a row naming no
// flag, a wrong default and a mistyped one.
func TestFlagTableCheckFails(t *testing.T) {
	rows := readmeFlags(t)
	setDefault := func(name, def string) func([]gatewaytest.FlagRow) []gatewaytest.FlagRow {
		return func(r []gatewaytest.FlagRow) []gatewaytest.FlagRow {
			for i := range r {
				if r[i].Name == name {
					r[i].Default = def
				}
			}
			return r
		}
	}
	tests := []struct {
		name string
		edit func([]gatewaytest.FlagRow) []gatewaytest.FlagRow
		want string
	}{
		{"a flag without a row", func(r []gatewaytest.FlagRow) []gatewaytest.FlagRow {
			return slices.DeleteFunc(r, func(f gatewaytest.FlagRow) bool { return f.Name == "heartbeat" })
		}, "--heartbeat has no row"},
		{"a row without a flag", func(r []gatewaytest.FlagRow) []gatewaytest.FlagRow {
			return append(r, gatewaytest.FlagRow{Name: "no-such-flag", Default: "1", Line: 1})
		}, "--no-such-flag, which does not exist"},
		{"a wrong default", setDefault("history-ttl", "12h"), `--history-ttl: the table's default "12h"`},
		{"a mistyped default", setDefault("queue", "lots"), `--queue: the table's default "lots" is not a value`},
		{"an empty default that is not", setDefault("addr", "empty"), `--addr: the table says empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := gatewaytest.CheckFlagTable(newTestFlagSet(), tt.edit(slices.Clone(rows)), newTestFlagSet)
			for _, err := range errs {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
			}
			t.Fatalf("errors %v, want one containing %q", errs, tt.want)
		})
	}
}
