package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFlagsWinOverEnvironment(t *testing.T) {
	env := map[string]string{
		"ROOMCAST_ADDR":          "127.0.0.1:1111",
		"ROOMCAST_HISTORY":       "50",
		"ROOMCAST_RETRY_MIN":     "1s",
		"ROOMCAST_MAX_BODY":      "1MiB",
		"ROOMCAST_PUBLISH_TOKEN": "from-env",
	}
	c, err := parseConfig([]string{"--history", "7", "--publish-token=from-flag"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:1111" || c.History != 7 || c.RetryMin != time.Second || c.MaxBody != 1<<20 || c.PublishToken != "from-flag" {
		t.Fatalf("config %+v", c)
	}
}

func TestDefaultsMatchTheContract(t *testing.T) {
	c, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		Addr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9090", History: 1000, HistoryTTL: 24 * time.Hour,
		MaxRooms: 100000, RetryMin: 3 * time.Second, RetryMax: 6 * time.Second, Heartbeat: 15 * time.Second,
		Queue: 256, MaxBody: 64 << 10, DrainDelay: 5 * time.Second, DrainWindow: 30 * time.Second, DrainTimeout: 45 * time.Second,
	}
	got := config{Addr: c.Addr, AdminAddr: c.AdminAddr, History: c.History, HistoryTTL: c.HistoryTTL, MaxRooms: c.MaxRooms,
		RetryMin: c.RetryMin, RetryMax: c.RetryMax, Heartbeat: c.Heartbeat, Queue: c.Queue, MaxBody: c.MaxBody,
		DrainDelay: c.DrainDelay, DrainWindow: c.DrainWindow, DrainTimeout: c.DrainTimeout}
	if !reflect.DeepEqual(got, want) || c.Redis != "" || c.PublishToken != "" {
		t.Fatalf("defaults\n got %+v\nwant %+v", got, want)
	}
}

func TestBadConfiguration(t *testing.T) {
	cases := map[string][]string{
		"unknown flag":                        {"--nope"},
		"bad duration":                        {"--heartbeat", "soon"},
		"bad size":                            {"--max-body", "lots"},
		"stray arg":                           {"extra"},
		"negative size":                       {"--max-body", "-1"},
		"ticket TTL beyond the max token age": {"--ticket-ttl", "5m", "--max-token-age", "4m"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := parseConfig(args, func(string) string { return "" }, io.Discard); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := parseConfig(nil, func(k string) string {
		if k == "ROOMCAST_QUEUE" {
			return "many"
		}
		return ""
	}, io.Discard); err == nil {
		t.Fatal("bad environment value accepted")
	}
}

func TestSizeFlagsShareOneRule(t *testing.T) {
	// Every unit is a power of 1024 whatever its case, as in roomcastctl.
	for in, want := range map[string]int64{"65536": 65536, "64KiB": 65536, "64KB": 65536, "64kb": 65536, "64K": 65536,
		"1MiB": 1 << 20, "4M": 4 << 20, "4Mi": 4 << 20, "2GiB": 2 << 30, "512 MiB": 512 << 20} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("byteSize.Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	// A size past a flag's range parses, and the range names it in the same units.
	if err := checkConfig([]string{"--max-queued-bytes", "2TiB"}, noEnvironment); err == nil || !strings.Contains(err.Error(), "between 1KiB and 1TiB") {
		t.Errorf("--max-queued-bytes 2TiB: %v, want the range error", err)
	}
	var b byteSize
	if err := b.Set("64 bytes"); err == nil || !strings.Contains(err.Error(), "KiB") {
		t.Errorf("byteSize.Set(\"64 bytes\") = %v, want an error naming the accepted forms", err)
	}
}

// TestAnonymousQuotaDefault: unless set, --max-anonymous-rooms-per-ip is a tenth of
// --max-anonymous-rooms, rounded up, and no quota with no cap; set by flag or by its
// environment twin, it is what was set.
func TestAnonymousQuotaDefault(t *testing.T) {
	cases := []struct {
		args []string
		env  string
		want int
	}{
		{nil, "", 1000},
		{[]string{"--max-anonymous-rooms", "55"}, "", 6},
		{[]string{"--max-anonymous-rooms", "0"}, "", 0},
		{[]string{"--max-anonymous-rooms-per-ip", "7"}, "", 7},
		{[]string{"--max-anonymous-rooms", "55"}, "0", 0},
	}
	for _, c := range cases {
		cfg, err := parseConfig(c.args, func(k string) string {
			if k == "ROOMCAST_MAX_ANONYMOUS_ROOMS_PER_IP" {
				return c.env
			}
			return ""
		}, io.Discard)
		if err != nil {
			t.Fatalf("%v %q: %v", c.args, c.env, err)
		}
		if got := cfg.Auth.MaxAnonymousRoomsPerIP; got != c.want {
			t.Errorf("%v, ROOMCAST_MAX_ANONYMOUS_ROOMS_PER_IP=%q: --max-anonymous-rooms-per-ip %d, want %d", c.args, c.env, got, c.want)
		}
	}
}
