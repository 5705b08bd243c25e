package main

import (
	"io"
	"strings"
	"testing"
)

func noEnvironment(string) string { return "" }

// checkConfig is what run does before it builds anything: parse, then check the
// flags against each other.
func checkConfig(args []string, getenv func(string) string) error {
	c, err := parseConfig(args, getenv, io.Discard)
	if err != nil {
		return err
	}
	return c.checkRelations()
}

func TestOutOfRangeFlagsAreRejected(t *testing.T) {
	cases := []struct {
		name string
		args []string
		flag string // named in the message
	}{
		{"heartbeat 1ns", []string{"--heartbeat", "1ns"}, "--heartbeat"},
		{"heartbeat 0", []string{"--heartbeat", "0"}, "--heartbeat"},
		{"heartbeat 11m", []string{"--heartbeat", "11m"}, "--heartbeat"},
		{"write-timeout 1ns", []string{"--write-timeout", "1ns"}, "--write-timeout"},
		{"write-timeout 0", []string{"--write-timeout", "0"}, "--write-timeout"},
		{"queue 50000000", []string{"--queue", "50000000"}, "--queue"},
		{"queue 0", []string{"--queue", "0"}, "--queue"},
		{"queue -1", []string{"--queue", "-1"}, "--queue"},
		{"queue-bytes 0", []string{"--queue-bytes", "0"}, "--queue-bytes"},
		{"queue-bytes 2GiB", []string{"--queue-bytes", "2GiB"}, "--queue-bytes"},
		{"retry-max 9999h", []string{"--retry-max", "9999h"}, "--retry-max"},
		{"retry-min 1ns", []string{"--retry-min", "1ns"}, "--retry-min"},
		{"retry-min 0", []string{"--retry-min", "0"}, "--retry-min"},
		{"history-ttl 1ns", []string{"--history-ttl", "1ns"}, "--history-ttl"},
		{"history-ttl 0", []string{"--history-ttl", "0"}, "--history-ttl"},
		{"history-ttl 999d", []string{"--history-ttl", "23976h"}, "--history-ttl"},
		{"history 0", []string{"--history", "0"}, "--history"},
		{"history 2e6", []string{"--history", "2000000"}, "--history"},
		{"max-rooms 0", []string{"--max-rooms", "0"}, "--max-rooms"},
		{"max-history-bytes 0", []string{"--max-history-bytes", "0"}, "--max-history-bytes"},
		{"accept-rate NaN", []string{"--accept-rate", "NaN"}, "--accept-rate"},
		{"accept-rate Inf", []string{"--accept-rate", "+Inf"}, "--accept-rate"},
		{"accept-rate -1", []string{"--accept-rate", "-1"}, "--accept-rate"},
		{"accept-rate 1e7", []string{"--accept-rate", "1e7"}, "--accept-rate"},
		{"accept-burst 0", []string{"--accept-burst", "0"}, "--accept-burst"},
		{"max-streams -1", []string{"--max-streams", "-1"}, "--max-streams"},
		{"max-streams-per-ip -1", []string{"--max-streams-per-ip", "-1"}, "--max-streams-per-ip"},
		{"linger -1s", []string{"--linger", "-1s"}, "--linger"},
		{"max-body 0", []string{"--max-body", "0"}, "--max-body"},
		{"max-body 17MiB", []string{"--max-body", "17MiB"}, "--max-body"},
		{"max-batch-body 0", []string{"--max-batch-body", "0"}, "--max-batch-body"},
		{"max-batch-body below max-body", []string{"--max-body", "1MiB", "--max-batch-body", "512KiB"}, "--max-batch-body"},
		{"max-queued-bytes -1", []string{"--max-queued-bytes", "-1"}, "--max-queued-bytes"},
		{"max-queued-bytes 2TiB", []string{"--max-queued-bytes", "2TiB"}, "--max-queued-bytes"},
		{"max-queued-bytes below queue-bytes", []string{"--max-queued-bytes", "1MiB", "--queue-bytes", "4MiB"}, "--max-queued-bytes"},
		{"redis-timeout 1ns", []string{"--redis-timeout", "1ns"}, "--redis-timeout"},
		{"redis-timeout 0", []string{"--redis-timeout", "0"}, "--redis-timeout"},
		{"publish-wait-replicas -1", []string{"--publish-wait-replicas", "-1"}, "--publish-wait-replicas"},
		{"publish-wait-replicas 17", []string{"--publish-wait-replicas", "17"}, "--publish-wait-replicas"},
		{"drain-delay -1s", []string{"--drain-delay", "-1s"}, "--drain-delay"},
		{"drain-delay 11m", []string{"--drain-delay", "11m"}, "--drain-delay"},
		{"drain-window -1s", []string{"--drain-window", "-1s"}, "--drain-window"},
		{"drain-timeout 0", []string{"--drain-timeout", "0"}, "--drain-timeout"},
		{"drain-timeout not above delay and window", []string{"--drain-delay", "30s", "--drain-window", "30s", "--drain-timeout", "45s"}, "--drain-timeout"},
		{"retry-min above retry-max", []string{"--retry-min", "5s", "--retry-max", "1s"}, "--retry-min"},
		{"log-level loud", []string{"--log-level", "loud"}, "--log-level"},
		{"empty admin-addr", []string{"--admin-addr", ""}, "--admin-addr"},
		{"admin-addr without host", []string{"--admin-addr", ":9090"}, "--admin-addr"},
		{"addr without host", []string{"--addr", ":8080"}, "--addr"},
		{"addr without port", []string{"--addr", "127.0.0.1"}, "--addr"},
		{"addr bad port", []string{"--addr", "127.0.0.1:http-ish"}, "--addr"},
		{"addr port too big", []string{"--addr", "127.0.0.1:70000"}, "--addr"},
		{"same addresses", []string{"--addr", "127.0.0.1:9000", "--admin-addr", "127.0.0.1:9000"}, "--admin-addr"},
		{"client-ip-header with a space", []string{"--client-ip-header", "X Forwarded"}, "--client-ip-header"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkConfig(tc.args, noEnvironment)
			if err == nil {
				t.Fatalf("%v accepted", tc.args)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.flag+" ") && !strings.Contains(msg, tc.flag+":") {
				t.Fatalf("message does not name %s: %q", tc.flag, msg)
			}
			if strings.Contains(msg, "\n") {
				t.Fatalf("message is not one line: %q", msg)
			}
		})
	}
}

func TestOutOfRangeEnvironmentIsRejected(t *testing.T) {
	err := checkConfig(nil, func(k string) string {
		if k == "ROOMCAST_HEARTBEAT" {
			return "1ns"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "--heartbeat") || !strings.Contains(err.Error(), "ROOMCAST_HEARTBEAT") {
		t.Fatalf("err = %v, want one naming --heartbeat and ROOMCAST_HEARTBEAT", err)
	}
}

func TestRangeBoundariesAreAccepted(t *testing.T) {
	cases := [][]string{
		nil, // the defaults
		{"--heartbeat", "1s"}, {"--heartbeat", "10m"},
		{"--history-ttl", "1s"}, {"--history-ttl", "720h"},
		{"--history", "1"}, {"--history", "1000000"},
		{"--drain-delay", "0"}, {"--drain-window", "1s"}, {"--drain-window", "0"},
		{"--drain-delay", "0", "--drain-window", "100ms", "--drain-timeout", "2s"},
		{"--retry-min", "100ms", "--retry-max", "200ms"},
		{"--retry-min", "10m", "--retry-max", "10m"},
		{"--write-timeout", "100ms"},
		{"--queue", "1"}, {"--queue", "65536"},
		{"--queue-bytes", "1KiB", "--max-queued-bytes", "0"}, {"--queue-bytes", "1GiB", "--max-queued-bytes", "1GiB"},
		{"--accept-rate", "0"}, {"--accept-rate", "0.5"}, {"--accept-rate", "1e6"},
		{"--max-streams", "0"}, {"--max-streams-per-ip", "0"}, {"--max-streams-per-ip", "5"},
		{"--linger", "0"},
		{"--max-body", "1"}, {"--max-body", "16MiB", "--max-batch-body", "64MiB"},
		{"--publish-wait-replicas", "16"},
		{"--redis-timeout", "10ms"}, {"--redis-timeout", "1m"},
		{"--log-level", "debug"}, {"--log-level", "ERROR"},
		{"--addr", "0.0.0.0:8080", "--admin-addr", "0.0.0.0:9090"},
		{"--addr", "[::1]:8080"}, {"--addr", "localhost:0", "--admin-addr", "localhost:0"},
		{"--client-ip-header", "X-Forwarded-For"},
	}
	for _, args := range cases {
		if err := checkConfig(args, noEnvironment); err != nil {
			t.Errorf("%v rejected: %v", args, err)
		}
	}
}

func TestRangeMessageNamesFlagAndRange(t *testing.T) {
	err := checkConfig([]string{"--heartbeat", "1ns"}, noEnvironment)
	if err == nil || err.Error() != "--heartbeat 1ns: must be between 1s and 10m" {
		t.Fatalf("err = %v", err)
	}
	err = checkConfig([]string{"--max-streams", "-3"}, noEnvironment)
	if err == nil || err.Error() != "--max-streams -3: must be 0 (no cap) or between 1 and 10000000" {
		t.Fatalf("err = %v", err)
	}
}

func TestEveryNumericFlagHasARange(t *testing.T) {
	fs := flagNames(t)
	n := 0
	for _, numericFlag := range fs {
		if numericFlag {
			n++
		}
	}
	if n < len(ranges) {
		t.Fatalf("found %d numeric flags of %d: the probe is broken", n, len(fs))
	}
	for name, numericFlag := range fs {
		if _, ok := ranges[name]; numericFlag && !ok {
			t.Errorf("--%s is numeric and has no range", name)
		}
	}
	for name := range ranges {
		if _, ok := fs[name]; !ok {
			t.Errorf("range for --%s, which is no flag", name)
		}
	}
}

// flagNames reports every flag of the gateway and whether its value is a number.
func flagNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	// Every flag's environment twin is looked up: that names them all.
	_, _ = parseConfig(nil, func(env string) string {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "ROOMCAST_"), "_", "-"))
		out[name] = false
		return ""
	}, io.Discard)
	for name := range out {
		// A number flag rejects a word, saying it is not one; string flags take it.
		_, err := parseConfig([]string{"--" + name + "=word"}, noEnvironment, io.Discard)
		out[name] = err != nil && strings.HasPrefix(err.Error(), "--"+name+`: "word" is not a`)
	}
	return out
}
