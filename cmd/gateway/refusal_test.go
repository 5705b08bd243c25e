package main

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/cmd/internal/size"
)

// TestConfigurationErrorsKeepOneForm: every configuration error, whether the flags
// refuse it, the access files do or a listener cannot open, is one line
// "gateway: …" naming the flag, and exit code 2, never a JSON log line.
func TestConfigurationErrorsKeepOneForm(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad duration", []string{"--history-ttl", "forever"}, `--history-ttl: "forever" is not a duration: write a number and a unit`},
		{"bad size", []string{"--max-body", "lots"}, `--max-body: "lots" is not a size: write a number of bytes`},
		{"bad number", []string{"--queue", "many"}, `--queue: "many" is not a whole number; the flag must be between 1 and 65536`},
		{"unknown flag", []string{"--nope"}, "unknown flag --nope"},
		{"bad log format", []string{"--log-format", "yaml"}, `--log-format "yaml": must be auto, json or text`},
		{"missing key file", []string{"--jwt-key", missing}, `--jwt-key "` + missing + `": no such file`},
		{"missing HMAC file", []string{"--jwt-hmac-file", missing}, `--jwt-hmac-file "` + missing + `": no such file`},
		{"public port in use", []string{"--addr", busy.Addr().String()}, "--addr " + busy.Addr().String() + ": the address is in use"},
		{"admin port in use", []string{"--admin-addr", busy.Addr().String()}, "--admin-addr " + busy.Addr().String() + ": the address is in use"},
		{"metrics port in use", []string{"--metrics-addr", busy.Addr().String()}, "--metrics-addr " + busy.Addr().String() + ": the address is in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, tc.args...)
			code, stderr := runGateway(t, args...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "gateway: ") || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("want one line \"gateway: …%s…\", got:\n%s", tc.want, stderr)
			}
		})
	}
}

// TestRefusalsNameTheAcceptedForms: a duration, size or number flag that refuses a
// value says what it accepts and the flag's range, by flag and by environment twin.
func TestRefusalsNameTheAcceptedForms(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{args: []string{"--history-ttl", "forever"}, want: []string{`--history-ttl: "forever" is not a duration`, "90s, 15m, 24h or 1h30m", "between 1s and 720h"}},
		{args: []string{"--history-ttl", "7d"}, want: []string{`--history-ttl: "7d": a day is not a unit of durations: write 168h`}},
		{args: []string{"--linger", "5"}, want: []string{`--linger: "5" has no unit: write e.g. 5s or 5ms`, "between 0s and 10m"}},
		{args: []string{"--drain-delay", "-"}, want: []string{"--drain-delay:", "is not a duration", "between 0s and 10m"}},
		{args: []string{"--max-queued-bytes", "a lot"}, want: []string{`--max-queued-bytes: "a lot" is not a size`, "power of 1024", "e.g. " + size.Examples, "0 (no limit) or between 1KiB and 1TiB"}},
		{args: []string{"--max-body", "3PiB"}, want: []string{"--max-body:", "more than 1PiB", "between 1 and 16MiB"}},
		{args: []string{"--accept-rate", "fast"}, want: []string{`--accept-rate: "fast" is not a number; the flag must be 0 (no limit) or between 0.01 and 1000000`}},
		{args: []string{"--queue", "99999999999999999999"}, want: []string{`--queue: "99999999999999999999" is out of range`}},
		{args: []string{"--addr"}, want: []string{"--addr needs a value"}},
		{env: map[string]string{"ROOMCAST_DRAIN_WINDOW": "soon"}, want: []string{`--drain-window (ROOMCAST_DRAIN_WINDOW): "soon" is not a duration`, "between 0s and 1h"}},
		{env: map[string]string{"ROOMCAST_QUEUE_BYTES": "4 megs"}, want: []string{`--queue-bytes (ROOMCAST_QUEUE_BYTES): "4 megs" is not a size`}},
	} {
		_, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err == nil {
			t.Errorf("%q %v: accepted", tc.args, tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %v: %q\nlacks %q", tc.args, tc.env, err, w)
			}
		}
	}
}

// TestNamedFormsAreAccepted: what a refusal offers as an example, a flag takes.
func TestNamedFormsAreAccepted(t *testing.T) {
	for _, v := range []string{"90s", "15m", "24h", "1h30m", "168h", "5s", "5ms"} {
		if err := newFlagSet(new(config)).Lookup("history-ttl").Value.Set(v); err != nil {
			t.Errorf("--history-ttl %s: %v", v, err)
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			t.Errorf("%s is not a duration: %v", v, err)
		}
	}
	for _, v := range strings.Split(strings.ReplaceAll(size.Examples, " or ", ", "), ", ") {
		var b byteSize
		if err := b.Set(v); err != nil {
			t.Errorf("byteSize.Set(%q), an example of the refusal: %v", v, err)
		}
	}
	for _, f := range []string{"auto", "json", "text", "TEXT"} {
		if _, err := parseConfig([]string{"--log-format", f}, noEnvironment, io.Discard); err != nil {
			t.Errorf("--log-format %s: %v", f, err)
		}
	}
}

// FuzzFlagValueRefusals feeds any value to the duration, size and number flags, by
// flag and by environment twin: each is taken or refused in one line that starts
// with the flag's name.
func FuzzFlagValueRefusals(f *testing.F) {
	for _, s := range []string{"forever", "7d", "5", "1.5d", "NaNd", "-1s", "64 bytes", "3PiB", "1e9", "\"", "\n", ""} {
		f.Add(s)
	}
	names := []string{"history-ttl", "linger", "drain-delay", "max-body", "max-queued-bytes", "queue", "accept-rate"}
	f.Fuzz(func(t *testing.T, v string) {
		for _, name := range names {
			_, err := parseConfig([]string{"--" + name + "=" + v}, noEnvironment, io.Discard)
			if err != nil && (!strings.HasPrefix(err.Error(), "--"+name) || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("--%s=%q: %q does not start with the flag", name, v, err)
			}
			env := EnvName(name)
			_, err = parseConfig(nil, func(k string) string {
				if k == env {
					return v
				}
				return ""
			}, io.Discard)
			if err != nil && (!strings.HasPrefix(err.Error(), "--"+name+" ("+env+")") || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("%s=%q: %q does not start with the flag and its twin", env, v, err)
			}
		}
	})
}
