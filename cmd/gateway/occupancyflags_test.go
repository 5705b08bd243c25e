package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestOccupancyFlags(t *testing.T) {
	c, err := parseConfig(nil, noEnvironment, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.OccupancyInterval != 2*time.Second {
		t.Fatalf("default occupancy interval %s, want 2s", c.OccupancyInterval)
	}
	env := map[string]string{"ROOMCAST_OCCUPANCY_INTERVAL": "500ms"}
	if c, err = parseConfig(nil, func(k string) string { return env[k] }, io.Discard); err != nil || c.OccupancyInterval != 500*time.Millisecond {
		t.Fatalf("from the environment: %s, %v; want 500ms", c.OccupancyInterval, err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"interval 50ms", []string{"--occupancy-interval", "50ms"}, "--occupancy-interval"},
		{"interval 0", []string{"--occupancy-interval", "0"}, "--occupancy-interval"},
		{"interval 2m", []string{"--occupancy-interval", "2m"}, "--occupancy-interval"},
		{"pod id with a space in fleet mode", []string{"--redis", "127.0.0.1:6379", "--pod-id", "a b"}, "--pod-id"},
		{"empty pod id in fleet mode", []string{"--redis", "127.0.0.1:6379", "--pod-id", ""}, "--pod-id"},
		{"pod id with a space embedded", []string{"--pod-id", "a b"}, "--pod-id"},
		{"empty pod id embedded", []string{"--pod-id", ""}, "--pod-id"},
		{"pod id with a control byte embedded", []string{"--pod-id", "a\x01b"}, "--pod-id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkConfig(tc.args, noEnvironment)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
	// The environment twin is checked the same way, and named.
	err = checkConfig(nil, func(k string) string {
		if k == "ROOMCAST_POD_ID" {
			return "a b"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "ROOMCAST_POD_ID") {
		t.Fatalf("ROOMCAST_POD_ID=\"a b\" embedded: %v, want an error naming it", err)
	}
	// Embedded and unset, a hostname that cannot name a pod falls back to a fixed one.
	if got := (config{Hot: hotFlags{PodID: "a b"}}).podID(); got != "roomcast" {
		t.Fatalf("embedded with an unusable hostname: %q, want roomcast", got)
	}
}

// TestBadPodIDExitsTwo: embedded as in fleet mode, a pod id that cannot name a pod
// stops the gateway with exit code 2 and a line naming the flag.
func TestBadPodIDExitsTwo(t *testing.T) {
	code, stderr := runGateway(t, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--pod-id", "a b")
	if code != 2 || !strings.Contains(stderr, `--pod-id "a b"`) {
		t.Fatalf("exit %d, stderr %q; want 2 naming --pod-id", code, stderr)
	}
}
