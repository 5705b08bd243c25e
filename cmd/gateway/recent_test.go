package main

import (
	"io"
	"strings"
	"testing"
)

// TestRecentBytesFlag: --recent-bytes (and its twin) defaults to 64MiB, takes 0 for
// "none kept", and refuses anything between 0 and 64KiB or past 1TiB.
func TestRecentBytesFlag(t *testing.T) {
	c, err := parseConfig(nil, noEnvironment, io.Discard)
	if err != nil || c.RecentBytes != 64<<20 || recentFor(c.RecentBytes) != 64<<20 {
		t.Fatalf("default: %d (%d for the registry), %v; want 64MiB", c.RecentBytes, recentFor(c.RecentBytes), err)
	}
	c, err = parseConfig(nil, func(k string) string {
		if k == "ROOMCAST_RECENT_BYTES" {
			return "0"
		}
		return ""
	}, io.Discard)
	if err != nil || c.RecentBytes != 0 || recentFor(c.RecentBytes) >= 0 {
		t.Fatalf("ROOMCAST_RECENT_BYTES=0: %d (%d for the registry), %v; want none kept", c.RecentBytes, recentFor(c.RecentBytes), err)
	}
	for _, v := range []string{"1KiB", "2TiB", "-1"} {
		err := checkConfig([]string{"--recent-bytes", v}, noEnvironment)
		if err == nil || !strings.Contains(err.Error(), "--recent-bytes") {
			t.Errorf("--recent-bytes %s: %v, want an error naming the flag", v, err)
		}
	}
}
