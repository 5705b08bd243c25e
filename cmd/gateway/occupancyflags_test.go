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
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkConfig(tc.args, noEnvironment)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
	// Embedded, a pod id that cannot name a pod falls back to a fixed one.
	c, err = parseConfig([]string{"--pod-id", "a b"}, noEnvironment, io.Discard)
	if err != nil || c.podID() != "roomcast" {
		t.Fatalf("embedded with a bad pod id: %q, %v; want roomcast", c.podID(), err)
	}
}
