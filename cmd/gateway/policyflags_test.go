package main

import (
	"io"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/rooms"
)

// TestRoomPolicyFlag: --room-policy is repeatable and comma-separated, its
// environment twin takes the comma-separated form (a flag wins over it), and a bad
// entry stops the start with an error naming the flag.
func TestRoomPolicyFlag(t *testing.T) {
	c, err := parseConfig([]string{"--room-policy", "ticker.*=latest", "--room-policy", "feed.*=drop-oldest, feed.vip=close"}, noEnvironment, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for room, want := range map[string]rooms.Policy{
		"ticker.eur": rooms.PolicyLatest, "feed.news": rooms.PolicyDropOldest, "feed.vip": rooms.PolicyClose, "lobby": rooms.PolicyClose,
	} {
		if got := c.RoomPolicies.For(room); got != want {
			t.Errorf("room %q: policy %s, want %s", room, got, want)
		}
	}
	if got, want := c.RoomPolicies.String(), "ticker.*=latest,feed.*=drop-oldest,feed.vip=close"; got != want {
		t.Errorf("policies %q, want %q", got, want)
	}

	policyEnv := func(v string) func(string) string {
		return func(k string) string {
			if k == "ROOMCAST_ROOM_POLICY" {
				return v
			}
			return ""
		}
	}
	env := policyEnv("ticker.*=latest,feed.*=drop-oldest")
	if c, err := parseConfig(nil, env, io.Discard); err != nil || c.RoomPolicies.For("feed.x") != rooms.PolicyDropOldest {
		t.Errorf("ROOMCAST_ROOM_POLICY: %q, %v", c.RoomPolicies, err)
	}
	if c, err := parseConfig([]string{"--room-policy", "feed.*=latest"}, env, io.Discard); err != nil || c.RoomPolicies.String() != "feed.*=latest" {
		t.Errorf("--room-policy over its twin: %q, %v", c.RoomPolicies, err)
	}
	if c, err := parseConfig(nil, noEnvironment, io.Discard); err != nil || len(c.RoomPolicies) != 0 || c.RoomPolicies.For("x") != rooms.PolicyClose {
		t.Errorf("no --room-policy: %q, %v; want none, close for every room", c.RoomPolicies, err)
	}

	for _, tc := range []struct{ value, want string }{
		{"ticker.*", `--room-policy: room policy "ticker.*": want pattern=policy`},
		{"ticker.*=newest", "want close, latest or drop-oldest"},
		{"tick*er=latest", "character 4"},
		{"a*=latest,a*=close", "given twice"},
	} {
		_, err := parseConfig([]string{"--room-policy", tc.value}, noEnvironment, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--room-policy %q: error %v, want one containing %q", tc.value, err, tc.want)
		}
	}
	_, err = parseConfig(nil, policyEnv("x=y"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--room-policy (ROOMCAST_ROOM_POLICY)") {
		t.Errorf("a bad ROOMCAST_ROOM_POLICY: error %v, want it named", err)
	}
}
