package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestRunTable(t *testing.T) {
	code, out, errOut := run("--pods", "3", "--rooms", "200", "--members", "3-5", "--publish-rate", "4/room", "--payload", "200")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"3 pods, 200 rooms x 3-5 members, 800 events/s, 200-byte payload, round-robin, Redis Cluster of 3 shards",
		"E_pods (pods a publish reaches)       2.374",
		"pod_deliveries    1,067 events/s",
		"unknown (no --limits file)",
		"first limit: unknown",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestRunJSONWithLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fanout.json")
	if err := os.WriteFile(path, []byte(`{"scenario":"fanout","deliveries_per_sec":100000,"egress_bytes_per_sec":4e7,"rss_per_conn_kib":38,"subscribers":20000,"p99_ms":40}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("--pods", "4", "--rooms", "5000", "--members", "10", "--publish-rate", "3000",
		"--payload", "1KiB", "--redis", "standalone", "--pod-memory", "1280Mi", "--reserved-memory", "256MiB",
		"--shard-publish-limit", "40000", "--limits", path, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var p Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if p.Inputs.Shards != 1 || p.Inputs.Payload != 1024 || p.Inputs.PodMemory != 1280<<20 || p.Limits.Scenario != "fanout" {
		t.Errorf("inputs %+v, limits %+v", p.Inputs, p.Limits)
	}
	// 12500 streams a pod of the 27594 that 1 GiB holds at 38 KiB (45%) come before
	// egress (7500 frames/s of 1155 B: 8.7 MB/s of 40 MB/s, 22%), deliveries (7.5%)
	// and the shard's publishes (3000/s of 40000/s, 7.5%).
	if p.FirstLimit != PodStreams || len(p.Resources) != 6 || !near(*p.FirstScale, 27594.0/12500, 1e-9) {
		t.Errorf("first limit %q, resources %+v", p.FirstLimit, p.Resources)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"e_pods", "ssubscribes_per_pod", "redis_deliveries_per_sec_per_shard", "redis_egress_bytes_per_sec_per_shard", "client_egress_bytes_per_sec_per_pod", "streams_per_pod", "first_limit_scale_factor"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("no %q in the JSON", k)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`[1,2]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "usage: roomcastctl plan"},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--members", "5-3"}, 2, "members"},
		{[]string{"--publish-rate", "fast"}, 2, "rate"},
		{[]string{"--payload", "-5"}, 2, "size"},
		{[]string{"--redis", "standalone", "--shards", "3"}, 2, "standalone redis is 1 shard"},
		{[]string{"--routing", "sticky"}, 2, "routing"},
		{[]string{"--pod-memory", "1Gi", "--reserved-memory", "2Gi"}, 2, "reserved memory"},
		{[]string{"--limits", filepath.Join(t.TempDir(), "missing.json")}, 1, "no such file"},
		{[]string{"--limits", bad}, 1, "not a loadgen -json report"},
	} {
		code, out, errOut := run(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%q: exit %d, want %d with %q:\n%s%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
}

func TestParseValues(t *testing.T) {
	if r, per, err := ParseRate("0.5/room"); err != nil || r != 0.5 || !per {
		t.Errorf("ParseRate(0.5/room) = %v %v %v", r, per, err)
	}
	if r, per, err := ParseRate("5000/s"); err != nil || r != 5000 || per {
		t.Errorf("ParseRate(5000/s) = %v %v %v", r, per, err)
	}
	if lo, hi, err := ParseMembers("3-5"); err != nil || lo != 3 || hi != 5 {
		t.Errorf("ParseMembers(3-5) = %d %d %v", lo, hi, err)
	}
	for _, in := range []string{"0", "5-", "-5", "3-2", "a", "10000001", "1-2-3"} {
		if _, _, err := ParseMembers(in); err == nil {
			t.Errorf("ParseMembers(%q) accepted", in)
		}
	}
}

// FuzzValues feeds the flag value parsers anything: they answer in bounds or err.
func FuzzValues(f *testing.F) {
	for _, s := range []string{"0.5/room", "5000/s", "3-5", "", "-", "9999999999-1", "1e9", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, _, err := ParseRate(s); err == nil && !(r >= 0 && r <= maxRate) {
			t.Fatalf("ParseRate(%q) = %v", s, r)
		}
		if lo, hi, err := ParseMembers(s); err == nil && (lo < 1 || hi > maxMembers || lo > hi) {
			t.Fatalf("ParseMembers(%q) = %d-%d", s, lo, hi)
		}
	})
}
