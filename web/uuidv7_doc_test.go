package web

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/wire"
)

// protocolDoc is the wire protocol's document, whose Node example makes a boot.
const protocolDoc = "../gateway/README.md"

// docUUIDv7Example returns the fenced js block of protocolDoc that defines uuidv7.
func docUUIDv7Example(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(b), "```js\n")[1:] {
		block, _, ok := strings.Cut(part, "\n```")
		if ok && strings.Contains(block, "function uuidv7()") {
			return block
		}
	}
	t.Fatalf("%s has no js block defining uuidv7()", protocolDoc)
	return ""
}

// TestDocUUIDv7Example: the Node example of the WebSocket section makes boots the
// gateway takes: UUIDv7s whose time is now, different on every call.
func TestDocUUIDv7Example(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no node on PATH; CI=true requires the documented Node example to be run")
		}
		t.Skip("no node on PATH (Debian: apt-get install nodejs)")
	}
	script := docUUIDv7Example(t) + "\nconsole.log(boot);\nfor (let i = 0; i < 99; i++) console.log(uuidv7());\n"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := time.Now().Add(-time.Second)
	out, err := exec.CommandContext(ctx, node, "--input-type=module", "-e", script).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	after := time.Now().Add(time.Second)
	boots := strings.Fields(string(out))
	if len(boots) != 100 {
		t.Fatalf("node printed %d boots, want 100:\n%s", len(boots), out)
	}
	seen := map[string]bool{}
	for _, s := range boots {
		b, err := wire.ParseBoot(s)
		if err != nil {
			t.Fatalf("the documented uuidv7() made %q: %v", s, err)
		}
		if at := wire.BootTime(b); at.Before(before) || at.After(after) {
			t.Fatalf("the documented uuidv7() made %q, of %v, not now", s, at)
		}
		if seen[b] {
			t.Fatalf("the documented uuidv7() made %q twice", s)
		}
		seen[b] = true
	}
}
