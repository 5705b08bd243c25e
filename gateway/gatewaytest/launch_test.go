package gatewaytest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With GATEWAYTEST_FAKE set, the test binary plays a gateway: it logs the start-up
// line with the addresses it was given, then behaves as the variable says.
func TestMain(m *testing.M) {
	if mode := os.Getenv("GATEWAYTEST_FAKE"); mode != "" {
		os.Exit(fakeGateway(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeGateway(mode string, args []string) int {
	flag := func(name string) string {
		for i, a := range args {
			if a == "--"+name && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	if mode == "die" {
		fmt.Fprintln(os.Stderr, `{"level":"ERROR","msg":"bad flag"}`)
		return 2
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Fprintf(os.Stderr, "{\"msg\":%q,\"addr\":%q,\"admin_addr\":%q,\"pod_id\":%q}\n", StartedMsg, flag("addr"), flag("admin-addr"), flag("pod-id"))
	<-sig
	if mode == "stubborn" {
		<-sig
	}
	fmt.Fprintln(os.Stderr, `{"msg":"roomcast gateway stopped"}`)
	return 3
}

func fake(mode string, args ...string) Options {
	return Options{Name: mode, Bin: os.Args[0], Env: []string{"GATEWAYTEST_FAKE=" + mode}, Args: args,
		StartTimeout: 20 * time.Second}
}

func TestLaunch(t *testing.T) {
	var lines []string
	o := fake("plain", "--admin-addr", "127.0.0.1:7")
	o.OnLog = func(l []byte) { lines = append(lines, string(l)) }
	p, err := Launch(o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Public != "http://127.0.0.1:0" || p.Admin != "http://127.0.0.1:7" || p.AdminAddr() != "127.0.0.1:7" {
		t.Errorf("addresses %q %q: want the default public and the given admin", p.Public, p.Admin)
	}
	if !p.Running() {
		t.Error("not running after start")
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code, at, _ := p.Exit(); code != 3 || at.IsZero() {
		t.Errorf("exit %d at %v, want 3", code, at)
	}
	if len(lines) != 2 || !strings.Contains(p.Log(), "roomcast gateway stopped") {
		t.Errorf("OnLog saw %q; log %q", lines, p.Log())
	}
}

// TestLaunchPodID: pods of a fleet get a pod id of their own unless the args name
// one; an embedded gateway gets none.
func TestLaunchPodID(t *testing.T) {
	podID := func(args ...string) string {
		t.Helper()
		var id string
		o := fake("plain", args...)
		o.Name = "pod a"
		o.OnLog = func(l []byte) {
			var m struct {
				PodID string `json:"pod_id"`
			}
			if id == "" && json.Unmarshal(l, &m) == nil {
				id = m.PodID
			}
		}
		p, err := Launch(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		return id
	}
	a, b := podID("--redis", "127.0.0.1:1"), podID("--redis=127.0.0.1:1")
	if a == b || !strings.HasPrefix(a, "pod-a-") || !strings.HasPrefix(b, "pod-a-") {
		t.Errorf("fleet pods got pod ids %q and %q: want two of their own", a, b)
	}
	if got := podID("--redis", "127.0.0.1:1", "--pod-id", "given"); got != "given" {
		t.Errorf("pod id %q, want the given one", got)
	}
	if got := podID("--redis-timeout", "1s"); got != "" {
		t.Errorf("an embedded gateway got pod id %q", got)
	}
}

func TestLaunchStubborn(t *testing.T) {
	p, err := Launch(fake("stubborn"))
	if err != nil {
		t.Fatal(err)
	}
	// The second SIGTERM ends it: Stop needs no kill.
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.Wait(time.Second); code != 3 {
		t.Errorf("exit %d, want 3", code)
	}
}

func TestLaunchExitsBeforeStarting(t *testing.T) {
	_, err := Launch(fake("die"))
	if err == nil || !strings.Contains(err.Error(), "bad flag") {
		t.Fatalf("error %v, want one carrying the log", err)
	}
}

func TestStartStopsAtCleanup(t *testing.T) {
	var p *Process
	t.Run("inner", func(t *testing.T) { p = Start(t, fake("plain")) })
	select {
	case <-p.Done():
	default:
		t.Fatal("still running after its test ended")
	}
}
