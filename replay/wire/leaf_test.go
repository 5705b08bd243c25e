package wire_test

import (
	"go/build"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The wire vocabulary is a leaf: it imports the standard library only.
func TestWireImportsTheStandardLibraryOnly(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("package wire imports %s", imp)
		}
	}
}

// The operators' CLI and the load generator speak the protocol through package wire
// and link none of the server: not the gateway, the history's Redis client, the JWT
// libraries or the web assets. The test helpers they share with the tests (the SSE
// decoder and loss tracker of gatewaytest, the WebSocket client, the poll loop, and
// the local Redis servers and proxies of redistest, which the chaos scenario runs)
// are allowed: what those link is checked like the rest.
func TestToolsLinkNoServer(t *testing.T) {
	allowed := []string{
		"github.com/roomcast/roomcast/replay/wire",
		"github.com/roomcast/roomcast/replay/polltest",
		"github.com/roomcast/roomcast/replay/redistest",
		"github.com/roomcast/roomcast/gateway/gatewaytest",
		"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient",
	}
	forbidden := []string{
		"github.com/roomcast/roomcast/gateway", "github.com/roomcast/roomcast/rooms",
		"github.com/roomcast/roomcast/replay", "github.com/roomcast/roomcast/web",
		"github.com/redis/rueidis", "github.com/lestrrat-go/jwx",
	}
	for _, cmd := range []string{"../../cmd/roomcastctl", "../../cmd/loadgen"} {
		out, err := exec.Command("go", "list", "-deps", cmd).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", cmd, err)
		}
		for dep := range strings.FieldsSeq(string(out)) {
			if slices.Contains(allowed, dep) {
				continue
			}
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s links %s", cmd, dep)
				}
			}
		}
	}
}
