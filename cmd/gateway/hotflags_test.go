package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestHotRoomFlags(t *testing.T) {
	noEnv := func(string) string { return "" }
	c, err := parseConfig(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if c.Hot.Rooms != "" || c.Hot.Partitions != 4 || c.Hot.PodID != host {
		t.Fatalf("defaults: %+v, want no hot rooms, 4 partitions, pod id %q", c.Hot, host)
	}
	env := map[string]string{"ROOMCAST_POD_ID": "gateway-7f9c-x2", "ROOMCAST_HOT_ROOMS": "lobby, team-*"}
	c, err = parseConfig([]string{"--redis", "127.0.0.1:6379", "--hot-room-partitions", "8"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.Hot.redis()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rc.HotRooms, []string{"lobby", "team-*"}) || rc.HotPartitions != 8 || rc.PodID != "gateway-7f9c-x2" {
		t.Fatalf("redis config %+v", rc)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad pattern", []string{"--redis", "127.0.0.1:6379", "--hot-rooms", "a{b}"}, "--hot-rooms"},
		{"star inside", []string{"--redis", "127.0.0.1:6379", "--hot-rooms", "a*b"}, "--hot-rooms"},
		{"one partition", []string{"--hot-room-partitions", "1"}, "--hot-room-partitions"},
		{"too many partitions", []string{"--hot-room-partitions", "65"}, "--hot-room-partitions"},
		{"blank pod id", []string{"--redis", "127.0.0.1:6379", "--hot-rooms", "lobby", "--pod-id", " "}, "--pod-id"},
		{"without redis", []string{"--hot-rooms", "lobby"}, "--redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, noEnv, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
		})
	}
}
