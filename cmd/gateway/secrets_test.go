package main

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

func TestParseRedis(t *testing.T) {
	for _, tc := range []struct {
		in, addrs, user, pass, shown string
	}{
		{"127.0.0.1:6379", "127.0.0.1:6379", "", "", "127.0.0.1:6379"},
		{" a:1 , b:2 ", "a:1,b:2", "", "", "a:1,b:2"},
		{"redis://u:p@a:1,redis://u:p@b:2", "a:1,b:2", "u", "p", "redis://u:xxxxx@a:1,redis://u:xxxxx@b:2"},
		{"u:p@a:1,b:2", "a:1,b:2", "u", "p", "redis://u:xxxxx@a:1,redis://u:xxxxx@b:2"},
		{"redis://:p%40ss@a:1", "a:1", "", "p@ss", "redis://:xxxxx@a:1"},
		{"redis://[::1]:6379", "[::1]:6379", "", "", "[::1]:6379"},
		{"rediss://a:1", "a:1", "", "", "rediss://a:1"},
		{"rediss://u:p@a:1,b:2", "a:1,b:2", "u", "p", "rediss://u:xxxxx@a:1,rediss://u:xxxxx@b:2"},
		{"a:1,rediss://b:2", "a:1,b:2", "", "", "rediss://a:1,rediss://b:2"},
	} {
		got, err := parseRedis(tc.in)
		if err != nil {
			t.Errorf("parseRedis(%q): %v", tc.in, err)
			continue
		}
		if got.tls != strings.HasPrefix(tc.shown, "rediss://") {
			t.Errorf("parseRedis(%q): tls %v", tc.in, got.tls)
		}
		if strings.Join(got.addrs, ",") != tc.addrs || got.username != tc.user || got.password != tc.pass || got.String() != tc.shown {
			t.Errorf("parseRedis(%q) = %v %q %q shown %q", tc.in, got.addrs, got.username, got.password, got.String())
		}
	}
	for _, in := range []string{
		"redis://u:pw-secret@a:1/2", "rediss://u:pw-secret@a:1,redis://u:pw-secret@b:1", "http://u:pw-secret@a:1", "redis://u:pw-secret@a", "u:pw-secret@",
		"redis://u:pw-secret@a:1,redis://v:pw-secret@b:1", "redis://u:pw-secret@a:1?db=2", ",",
	} {
		_, err := parseRedis(in)
		if err == nil {
			t.Errorf("parseRedis(%q) accepted", in)
			continue
		}
		if strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("parseRedis(%q): the error shows the password: %v", in, err)
		}
	}
}

// FuzzParseRedis: whatever --redis holds, neither the error nor the printable form
// shows a password.
func FuzzParseRedis(f *testing.F) {
	for _, s := range []string{"127.0.0.1:6379", "redis://user:password1@h:1", "u:password1@h:1,h:2",
		"redis://:password1@h:1/x", "rediss://u:password1@h:1", "redis://u:pass%2Fword1@h:1"} {
		f.Add(s)
	}
	const templates = "--redis: seed (): want host:port or redis://[user:password@]host:port, without a path or query scheme want redis:// or rediss:// every seed must use the same scheme every seed must carry the same credentials no address xxxxx"
	f.Fuzz(func(t *testing.T, s string) {
		target, err := parseRedis(s)
		out := ""
		if err != nil {
			out = err.Error()
		} else {
			out = target.String()
			for _, a := range target.addrs {
				if strings.Contains(a, "@") {
					t.Fatalf("address %q keeps credentials", a)
				}
			}
		}
		for _, seed := range strings.Split(s, ",") {
			at := strings.LastIndex(seed, "@")
			if at < 0 {
				continue
			}
			user := seed[:at]
			if i := strings.Index(user, "://"); i >= 0 {
				user = user[i+3:]
			}
			_, pass, ok := strings.Cut(user, ":")
			// The seed is quoted in parentheses: a password ending in ")" may match
			// the end of the (shown) host and the closing one by chance.
			if !ok || len(pass) < 6 || strings.Count(s, pass) > 1 || strings.Contains(templates, pass) || strings.ContainsAny(pass, "()") {
				continue
			}
			if strings.Contains(out, pass) {
				t.Fatalf("parseRedis(%q) shows the password %q: %s", s, pass, out)
			}
		}
	})
}

func TestRedactArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"gw", "--publish-token", "tok-1", "--history", "5"}, []string{"gw", "--publish-token", "xxxxx", "--history", "5"}},
		{[]string{"gw", "-publish-token=tok-1,tok-2"}, []string{"gw", "-publish-token=xxxxx"}},
		{[]string{"gw", "--publish-token="}, []string{"gw", "--publish-token=xxxxx"}},
		{[]string{"gw", "--redis=redis://u:pw,d@a:1,b:2"}, []string{"gw", "--redis=xxxxx"}},
		{[]string{"gw", "-redis", "u:pw@a:1"}, []string{"gw", "-redis", "xxxxx"}},
		{[]string{"gw", "--redis", "a:1,b:2"}, []string{"gw", "--redis", "a:1,b:2"}},
		{[]string{"gw", "--publish-token-file", "/run/tok", "--publish-token"}, []string{"gw", "--publish-token-file", "/run/tok", "--publish-token"}},
		{[]string{"gw", "extra", "--publish-token=tok-1"}, []string{"gw", "extra", "--publish-token=xxxxx"}},
		{[]string{"--publish-token"}, []string{"--publish-token"}},
	} {
		if got := redactArgs(tc.in); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("redactArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSecretFlagsAreRedacted: a flag that has a *-file form holds a secret, so
// /debug/pprof/cmdline hides its value; every flag redactArgs knows exists.
func TestSecretFlagsAreRedacted(t *testing.T) {
	names := flagNames(t)
	for name := range names {
		if base, ok := strings.CutSuffix(name, "-file"); ok && names[base] {
			t.Errorf("--%s has a file form: add it to secretFlags", base)
		}
		if _, ok := names[name+"-file"]; ok {
			if _, ok := secretFlags[name]; !ok {
				t.Errorf("--%s has a file form (--%s-file): add it to secretFlags", name, name)
			}
		}
	}
	for name := range secretFlags {
		if _, ok := names[name]; !ok {
			t.Errorf("secretFlags names --%s, which is no flag", name)
		}
	}
}

// TestPprofCmdlineHidesSecrets: /debug/pprof/cmdline serves the command line with the
// secrets passed as flags replaced.
func TestPprofCmdlineHidesSecrets(t *testing.T) {
	const token, password = "tok-in-args-51", "pw-in-args-51"
	gatewaytest.Secret("a publish token passed as a flag", token)
	gatewaytest.Secret("a Redis password passed as a flag", password)
	p := startGateway(t, "--publish-token", token, "--redis=redis://u:"+password+"@127.0.0.1:1", "--history", "7")
	res, err := http.Get(p.Admin + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	// The launcher puts the listener flags first.
	args, want := strings.Split(string(b), "\x00"), []string{"--publish-token", "xxxxx", "--redis=xxxxx", "--history", "7"}
	if res.StatusCode != http.StatusOK || len(args) < len(want) || !slices.Equal(args[len(args)-len(want):], want) {
		t.Fatalf("/debug/pprof/cmdline: %d %q", res.StatusCode, args)
	}
}
