package web

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"go.uber.org/goleak"
)

// env is what TestMain found out about the machine. The browser tests share
// it; the handler tests need none of it.
var env struct {
	tmp      string // removed when the tests end
	chromium string // the browser, "" when none was found

	gatewayOnce sync.Once // the gateway binary is built on first use
	gateway     string    // the gateway binary built for these tests
	gatewayErr  error     // why it could not be built
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse() // for testing.Short and testing.Verbose below
	tmp, err := os.MkdirTemp("", "roomcast-web-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	env.tmp = tmp
	env.chromium = findChromium()

	code := gatewaytest.RedactionMain(m.Run)

	stopBrowser()
	httpClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			code = 1
		}
	}
	return code
}

// findChromium looks for the browser: $ROOMCAST_CHROMIUM when set (and
// nothing else, so a wrong value is noticed), else Debian's
// /usr/bin/chromium, else the usual names on PATH.
func findChromium() string {
	candidates := []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "headless_shell"}
	if c := os.Getenv("ROOMCAST_CHROMIUM"); c != "" {
		candidates = []string{c}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// requireBrowser skips the test when no browser is installed, or fails it
// under CI=true, where a missing browser must not pass silently.
func requireBrowser(t *testing.T) {
	t.Helper()
	if testing.Short() {
		if os.Getenv("CI") == "true" {
			t.Fatal("-short skips the browser tests; CI=true requires them to run")
		}
		t.Skip("browser test; skipped with -short")
	}
	if env.chromium == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium found (set ROOMCAST_CHROMIUM or install chromium); CI=true requires the browser tests to run")
		}
		t.Skip("no Chromium found; install chromium (or set ROOMCAST_CHROMIUM) to run the browser tests")
	}
}

// requireGateway is requireBrowser plus the gateway binary.
func requireGateway(t *testing.T) string {
	t.Helper()
	requireBrowser(t)
	return gatewayBin(t)
}

// gatewayBin returns the gateway binary, built on first use: only the tests
// that run a gateway need it.
func gatewayBin(t *testing.T) string {
	t.Helper()
	env.gatewayOnce.Do(func() { env.gateway, env.gatewayErr = gatewaytest.Build(env.tmp) })
	if env.gatewayErr != nil {
		t.Fatalf("the gateway does not build: %v", env.gatewayErr)
	}
	return env.gateway
}

// artifactsDir is where screenshots go: $ROOMCAST_ARTIFACTS when set, so CI
// can keep them, else a directory removed with the test.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ROOMCAST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
