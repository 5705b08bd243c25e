package main

import (
	"flag"
	"testing"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// TestREADMEGlobalFlagTable: the table of global flags in cmd/roomcastctl/README.md
// names exactly the flags globals registers. Only the names are compared: a flag's
// own default is empty, and the default the table gives applies after the
// environment is read.
func TestREADMEGlobalFlagTable(t *testing.T) {
	rows, err := gatewaytest.FlagTable("README.md", "# `roomcastctl`")
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].Default = ""
	}
	fs := flag.NewFlagSet("roomcastctl", flag.ContinueOnError)
	new(globals).register(fs)
	for _, err := range gatewaytest.CheckFlagTable(fs, rows, nil) {
		t.Error(err)
	}
	if len(rows) < 2 {
		t.Fatalf("the table has %d rows", len(rows))
	}
}
