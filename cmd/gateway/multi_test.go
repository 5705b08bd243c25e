package main

import (
	"io"
	"strings"
	"testing"
)

// TestMaxRoomsPerStream: the flag defaults to 32, its environment twin sets it, and
// it accepts 1 to 64.
func TestMaxRoomsPerStream(t *testing.T) {
	c, err := parseConfig(nil, noEnvironment, io.Discard)
	if err != nil || c.MaxRoomsPerStream != 32 {
		t.Fatalf("--max-rooms-per-stream default %d, %v; want 32", c.MaxRoomsPerStream, err)
	}
	env := func(k string) string {
		if k == "ROOMCAST_MAX_ROOMS_PER_STREAM" {
			return "5"
		}
		return ""
	}
	if c, err := parseConfig(nil, env, io.Discard); err != nil || c.MaxRoomsPerStream != 5 {
		t.Fatalf("ROOMCAST_MAX_ROOMS_PER_STREAM=5: %d, %v", c.MaxRoomsPerStream, err)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"1", true}, {"64", true}, {"0", false}, {"65", false}, {"-1", false}} {
		_, err := parseConfig([]string{"--max-rooms-per-stream", tc.value}, noEnvironment, io.Discard)
		if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "--max-rooms-per-stream") {
			t.Fatalf("--max-rooms-per-stream %s: %v", tc.value, err)
		}
	}
}
