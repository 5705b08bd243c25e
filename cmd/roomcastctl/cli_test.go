package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// agreedAdmin serves GET /admin/rooms and /admin/rooms/{room} with the agreed JSON
// (the pod's routes are built elsewhere), and records what it was asked.
type agreedAdmin struct {
	mu       sync.Mutex
	queries  []string
	auth     []string
	listBody string
	roomBody string
}

func (a *agreedAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.queries = append(a.queries, r.URL.RequestURI())
	a.auth = append(a.auth, r.Header.Get("Authorization"))
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/admin/rooms" && r.URL.Query().Get("limit") == "5000":
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"invalid_limit","message":"limit is 1 to 1000"}`))
	case r.URL.Path == "/admin/rooms":
		w.Write([]byte(a.listBody))
	case r.URL.Path == "/admin/rooms/chat-42":
		w.Write([]byte(a.roomBody))
	default:
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"not_found","message":"no such route"}`))
	}
}

const (
	agreedList = `{"pod":"pod-a","rooms":[{"room":"team-7.chat","members":12},{"room":"team-7.news","members":3}],"total":5,"truncated":true}`
	agreedRoom = `{"room":"chat-42","pod":"pod-a","members":12,"subscription":"subscribed","epoch":"k3x9q","head":48,` +
		`"queue_depth":{"p50":0,"p90":1,"p99":4,"max":9},` +
		`"fleet":[{"pod":"pod-a","members":12,"updated_at":"2026-12-01T09:00:00Z"},{"pod":"pod-b","members":8,"updated_at":"2026-12-01T09:00:01Z"}],"fleet_members":20}`
)

// TestRooms: rooms and rooms ROOM against a server answering the agreed JSON: the
// query, the admin token, the human table and the JSON passed through. (The pod's
// own routes are tested where they are built.)
func TestRooms(t *testing.T) {
	a := &agreedAdmin{listBody: agreedList, roomBody: agreedRoom}
	srv := httptest.NewServer(a)
	defer srv.Close()
	c := newCtl(t, "ROOMCASTCTL_ADMIN_URL", srv.URL, "ROOMCASTCTL_ADMIN_TOKEN", "admin-secret-1")

	r := c.run("", "rooms", "--prefix", "team-7.", "--limit", "2")
	if r.code != exitOK {
		t.Fatalf("rooms: exit %d, stderr %s", r.code, r.errOut)
	}
	for _, want := range []string{"pod pod-a: 5 rooms with local members, the first 2 shown", "  MEMBERS  ROOM\n       12  team-7.chat\n        3  team-7.news\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("rooms output lacks %q:\n%s", want, r.out)
		}
	}
	r = c.run("", "rooms", "chat-42")
	for _, want := range []string{"members       12 here, 20 in the fleet", "subscription  subscribed", "epoch         k3x9q",
		"head          48", "p50 0  p90 1  p99 4  max 9", "pod-b  8        2026-12-01T09:00:01Z"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("rooms chat-42 output lacks %q:\n%s", want, r.out)
		}
	}
	r = c.run("", "rooms", "chat-42", "--json")
	var d roomDetail
	if err := json.Unmarshal([]byte(r.out), &d); err != nil || d.FleetMembers != 20 || len(d.Fleet) != 2 {
		t.Errorf("rooms chat-42 --json: %q (%v)", r.out, err)
	}
	r = c.run("", "--json", "rooms")
	var l roomList
	if err := json.Unmarshal([]byte(r.out), &l); err != nil || l.Pod != "pod-a" || !l.Truncated {
		t.Errorf("rooms --json: %q (%v)", r.out, err)
	}
	r = c.run("", "rooms", "--limit", "5000")
	if r.code != exitFailed || !strings.Contains(r.errOut, "400 invalid_limit: limit is 1 to 1000") {
		t.Errorf("rooms --limit 5000: exit %d, stderr %q", r.code, r.errOut)
	}
	r = c.run("", "rooms", "bad{room}")
	if r.code != exitUsage {
		t.Errorf("rooms bad{room}: exit %d", r.code)
	}
	r = c.run("", "rooms", "chat-42", "--limit", "3")
	if r.code != exitUsage {
		t.Errorf("rooms ROOM --limit: exit %d", r.code)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	wantQ := []string{"/admin/rooms?limit=2&prefix=team-7.", "/admin/rooms/chat-42", "/admin/rooms/chat-42", "/admin/rooms", "/admin/rooms?limit=5000"}
	if strings.Join(a.queries, " ") != strings.Join(wantQ, " ") {
		t.Errorf("requests %q, want %q", a.queries, wantQ)
	}
	for _, h := range a.auth {
		if h != "Bearer admin-secret-1" {
			t.Errorf("Authorization %q, want the admin token", h)
		}
	}
}

// TestCredentialSources: flag, file and environment, in that order; a bad value or
// file is a usage error that does not quote the credential.
func TestCredentialSources(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"state":"ready"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "\ufeff\r\n  file-token-1  \r\n\r\n")
	two := write("two", "file-token-2\nfile-token-3\n")
	spaced := write("spaced", "file token 4\n")
	empty := write("empty", "\n\n")

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		auth string // the Authorization sent; "" for none, or no request
		err  string
	}{
		{"none", nil, nil, exitOK, "", ""},
		{"env", []string{"ROOMCASTCTL_ADMIN_TOKEN", "env-token-1"}, nil, exitOK, "Bearer env-token-1", ""},
		{"file over env", []string{"ROOMCASTCTL_ADMIN_TOKEN", "env-token-1"}, []string{"--admin-token-file", good}, exitOK, "Bearer file-token-1", ""},
		{"flag over env", []string{"ROOMCASTCTL_ADMIN_TOKEN", "env-token-1"}, []string{"--admin-token", "flag-token-1"}, exitOK, "Bearer flag-token-1", ""},
		{"after the command wins", nil, []string{"--admin-token", "flag-token-1", "stats", "--admin-token", "flag-token-2"}, exitOK, "Bearer flag-token-2", ""},
		{"two tokens in the file", nil, []string{"--admin-token-file", two}, exitUsage, "", "more than one token"},
		{"a space in the file", nil, []string{"--admin-token-file", spaced}, exitUsage, "", "offset 4"},
		{"empty file", nil, []string{"--admin-token-file", empty}, exitUsage, "", "holds no token"},
		{"missing file", nil, []string{"--admin-token-file", filepath.Join(dir, "nope")}, exitUsage, "", "no such file"},
		{"control byte in env", []string{"ROOMCASTCTL_ADMIN_TOKEN", "env\ntoken"}, nil, exitUsage, "", "ROOMCASTCTL_ADMIN_TOKEN: token has a space, control or non-ASCII byte at offset 3"},
		{"url with credentials", nil, []string{"--admin-url", "http://u:pw-secret-9@127.0.0.1:1"}, exitUsage, "", "not in the URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCtl(t, append([]string{"ROOMCASTCTL_ADMIN_URL", srv.URL}, tc.env...)...)
			c.secrets = append(c.secrets, "file-token-1", "file-token-2", "file-token-3", "file token 4", "flag-token-1", "flag-token-2", "pw-secret-9")
			args := tc.args
			if !slices.Contains(args, "stats") {
				args = append(args, "stats", "--json")
			}
			mu.Lock()
			got = nil
			mu.Unlock()
			r := c.run("", args...)
			if r.code != tc.code || !strings.Contains(r.errOut, tc.err) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.errOut, tc.code, tc.err)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.code == exitOK && (len(got) != 1 || got[0] != tc.auth) {
				t.Errorf("Authorization sent %q, want %q", got, tc.auth)
			}
			if tc.code != exitOK && len(got) != 0 {
				t.Errorf("sent a request after a usage error")
			}
		})
	}
}

// TestHelp: --help for the binary and every command exits 0 with examples on
// stdout; plan is a stub in this binary.
func TestHelp(t *testing.T) {
	c := newCtl(t)
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		r := c.run("", args...)
		if r.code != exitOK || !strings.Contains(r.out, "Examples:") || !strings.Contains(r.out, "tail ") {
			t.Errorf("%v: exit %d, out %q", args, r.code, r.out)
		}
	}
	for name := range commands() {
		for _, args := range [][]string{{name, "--help"}, {"help", name}} {
			r := c.run("", args...)
			if r.code != exitOK || !strings.Contains(r.out, "usage: roomcastctl "+name) || !strings.Contains(r.out, "Examples:\n  roomcastctl") || !strings.Contains(r.out, "-admin-url") {
				t.Errorf("%v: exit %d, out %q", args, r.code, r.out)
			}
		}
	}
	r := c.run("")
	if r.code != exitUsage || !strings.Contains(r.errOut, "Commands:") {
		t.Errorf("no command: exit %d, stderr %q", r.code, r.errOut)
	}
	r = c.run("", "--json", "plan", "--pods", "3", "--rooms", "100", "--members", "4", "--publish-rate", "10")
	var out struct {
		EPods float64 `json:"e_pods"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.out), &out) != nil || out.EPods <= 1 || out.EPods > 3 {
		t.Errorf("plan --json: exit %d, E_pods %v, stdout %q, stderr %q", r.code, out.EPods, r.out, r.errOut)
	}
}

// FuzzParseSecret: a credential file's content gives either an error or one token
// that can stand in an Authorization header and was in the file.
func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{"tok\n", "\ufeff tok \r\n", "a\nb\n", "", "\n\n", "a b", "t\x00k", "é", strings.Repeat("x", maxSecret+1)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSecret(b)
		if err != nil {
			if s != "" {
				t.Fatalf("error %v with a token", err)
			}
			// A short input may be a word of the message itself ("I b" is in
			// "non-ASCII byte"): only an input of a token's size counts as quoted.
			if in := strings.TrimSpace(string(b)); len(in) >= 8 && strings.Contains(err.Error(), in) {
				t.Fatalf("the error quotes the input: %v", err)
			}
			return
		}
		if s == "" || len(s) > maxSecret || !utf8.ValidString(s) || !headerSafe(s, maxSecret) {
			t.Fatalf("token %q", s)
		}
		if !strings.Contains(string(b), s) {
			t.Fatalf("token %q not in the input", s)
		}
	})
}
