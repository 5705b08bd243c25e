package web

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/replaytest"
)

// The npm EventSource clients, run under node: what many server-side and tool
// clients use instead of a browser's. web/testdata/eventsource/package.json
// names them; .ci/eventsource installs them and prints the directory that
// ROOMCAST_EVENTSOURCE must name.
const (
	eventsourceManifest = "testdata/eventsource/package.json"
	eventsourceScript   = "testdata/eventsource/follow.mjs"
)

// requireNodeEventSource returns node and the directory of the clients, and
// the clients' package names. It skips the test when either is missing, or
// fails it under CI=true, where the interop test must run.
func requireNodeEventSource(t *testing.T) (node, dir string, clients []string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true requires the node interop test to run (.ci/run installs node, npm and the clients)")
		}
		t.Skip(msg)
	}
	if testing.Short() {
		missing("node interop test; skipped with -short")
	}
	raw, err := os.ReadFile(eventsourceManifest)
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct{ Dependencies map[string]string }
	if err := json.Unmarshal(raw, &manifest); err != nil || len(manifest.Dependencies) == 0 {
		t.Fatalf("%s: %v, %d clients", eventsourceManifest, err, len(manifest.Dependencies))
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("no node on PATH (Debian: apt-get install nodejs npm)")
	}
	dir = os.Getenv("ROOMCAST_EVENTSOURCE")
	if dir == "" {
		missing("ROOMCAST_EVENTSOURCE is not set (ROOMCAST_EVENTSOURCE=$(bash .ci/eventsource) installs the clients)")
	}
	for name, spec := range manifest.Dependencies {
		var meta struct{ Name, Version string }
		raw, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err == nil {
			err = json.Unmarshal(raw, &meta)
		}
		if err != nil || "npm:"+meta.Name+"@"+meta.Version != spec {
			missing("%s is not installed in %s as %s (%v; bash .ci/eventsource installs it)", name, dir, spec, err)
		}
		clients = append(clients, name)
	}
	slices.Sort(clients)
	return node, dir, clients
}

// nodeRecord is one line of follow.mjs: what the EventSource dispatched.
type nodeRecord struct {
	Kind       string // started, open, error, message, resync, reauth or anchor
	Type       string // the event's type
	ID         string // its lastEventId
	Data       string
	ReadyState int    // of an error
	Version    string // of started: the package's version
}

// nodeSource is one EventSource in a node process (testdata/eventsource/follow.mjs).
type nodeSource struct {
	t      *testing.T
	stdin  io.WriteCloser
	lines  chan nodeRecord
	stderr replaytest.SyncBuffer
	seen   []nodeRecord
}

// startNodeSource runs follow.mjs with the client pkg of dir on url. The
// process ends when the test does: its standard input closes, and it is killed
// if it has not exited 10 s later.
func startNodeSource(t *testing.T, node, dir, pkg, url string) *nodeSource {
	t.Helper()
	script, err := filepath.Abs(eventsourceScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, dir, pkg, url)
	n := &nodeSource{t: t, lines: make(chan nodeRecord, 256)}
	cmd.Stderr = &n.stderr
	if n.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("node: %v", err)
	}
	go func() {
		defer close(n.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var r nodeRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = nodeRecord{Kind: "unparsed", Data: sc.Text()}
			}
			n.lines <- r
		}
	}()
	t.Cleanup(func() {
		n.stdin.Close()
		drained := make(chan struct{})
		go func() {
			for range n.lines {
			}
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(10 * time.Second):
			t.Errorf("node (pid %d) still running 10s after its input closed; killed", cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-drained
		}
		_ = cmd.Wait()
	})
	return n
}

// await reads what the EventSource dispatches until ok holds for all of it,
// for at most 15 s, and returns it.
func (n *nodeSource) await(what string, ok func([]nodeRecord) bool) []nodeRecord {
	n.t.Helper()
	deadline := time.After(15 * time.Second)
	for !ok(n.seen) {
		select {
		case r, more := <-n.lines:
			if !more {
				n.t.Fatalf("node ended while waiting for %s; it dispatched %+v; stderr:\n%s", what, n.seen, n.stderr.String())
			}
			n.seen = append(n.seen, r)
		case <-deadline:
			n.t.Fatalf("timed out waiting for %s; it dispatched %+v; stderr:\n%s", what, n.seen, n.stderr.String())
		}
	}
	return n.seen
}

// count returns how many of rs are of kind.
func count(rs []nodeRecord, kind string) int {
	n := 0
	for _, r := range rs {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

// TestNodeEventSourceResumesFromTheAnchor: each npm EventSource client opens a
// room's stream under node, and the stream ends (a shed) after its anchor and
// before any event. What is published while the client reconnects (the proxy
// holds its reconnect back meanwhile) reaches it, in order and without a
// resync: its reconnect carried the anchor's id as Last-Event-ID, which it kept
// from a block with data. The anchor reaches an anchor listener, never
// onmessage. Against a gateway that sent the anchor as an id alone, the clients
// that take an id only from a block with data (4.1.1, 5.1.0) reconnected
// without Last-Event-ID and missed those events.
func TestNodeEventSourceResumesFromTheAnchor(t *testing.T) {
	node, dir, clients := requireNodeEventSource(t)
	gw := launchGateway(t, gatewayBin(t), "127.0.0.1:0", "127.0.0.1:0")
	px := newFrontProxy(t, gw)
	for _, pkg := range clients {
		for _, history := range []int{2, 0} {
			t.Run(fmt.Sprintf("%s/history=%d", pkg, history), func(t *testing.T) {
				room := fmt.Sprintf("node-%s-%d", strings.ReplaceAll(pkg, ".", "-"), history)
				var last *published
				if history > 0 {
					last = &gw.publishN(room, history)[history-1]
				}
				anchor, data := anchorData(room, last)
				es := startNodeSource(t, node, dir, pkg, px.url("/rooms/"+room+"/events"))
				started := es.await("the client to start", func(rs []nodeRecord) bool { return len(rs) > 0 })
				if v := strings.TrimPrefix(pkg, "eventsource-"); started[0].Kind != "started" || started[0].Version != v {
					t.Fatalf("node started %+v, want eventsource %s", started[0], v)
				}
				// The anchor goes out with the first write, which carries the
				// response headers too: once the client is open, it is on its way,
				// ahead of the end of the stream.
				es.await("the stream to open", func(rs []nodeRecord) bool { return count(rs, "open") == 1 })

				held := px.hold(t)
				if n := gw.shed(100); n != 1 {
					t.Fatalf("shed closed %d streams, want the client's", n)
				}
				held.arrived(t)
				missed := gw.publishN(room, 2)
				held.release()
				es.await("the reconnect", func(rs []nodeRecord) bool { return count(rs, "open") == 2 })
				live := gw.publishN(room, 1)
				rs := es.await("the live event", func(rs []nodeRecord) bool {
					return slices.ContainsFunc(rs, func(r nodeRecord) bool { return r.Kind == "message" && r.ID == live[0].ID })
				})

				var got, anchors []string
				for _, r := range rs {
					switch r.Kind {
					case "message":
						got = append(got, r.Type+" "+r.ID)
					case "anchor":
						anchors = append(anchors, r.ID+" "+r.Data)
					case "resync", "reauth", "unparsed":
						t.Errorf("the client dispatched %+v", r)
					}
				}
				want := []string{"message " + missed[0].ID, "message " + missed[1].ID, "message " + live[0].ID}
				if !slices.Equal(got, want) {
					t.Errorf("messages %q, want %q: every event once, in order", got, want)
				}
				if want := []string{anchor + " " + data}; !slices.Equal(anchors, want) {
					t.Errorf("anchor events %q, want %q", anchors, want)
				}
				if reqs := px.requestsFor(room); len(reqs) != 2 || reqs[0].Header != "" || reqs[1].Header != anchor {
					t.Errorf("subscribe requests %+v: want the reconnect to carry Last-Event-ID %q", reqs, anchor)
				}
			})
		}
	}
}
