package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/polltest"
)

// tourSection is the README's part of the tour that the newcomer's walk runs.
const tourSection = "### Subscribe, publish, resume"

// tourBlocks returns the fenced sh blocks of a section of a Markdown file, in order
// (gatewaytest.MarkdownSection says where the section ends).
func tourBlocks(path, heading string) ([]string, error) {
	lines, _, err := gatewaytest.MarkdownSection(path, heading)
	if err != nil {
		return nil, err
	}
	var blocks, cur []string
	inSh, inFence := false, false
	for _, line := range lines {
		switch {
		case inFence && strings.HasPrefix(line, "```"):
			if inSh {
				blocks = append(blocks, strings.Join(cur, "\n"))
			}
			inFence, inSh, cur = false, false, nil
		case inFence:
			cur = append(cur, line)
		case strings.HasPrefix(line, "```"):
			inFence, inSh = true, strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh"
		}
	}
	return blocks, nil
}

// syncBuffer is a bytes.Buffer that a child process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// shell runs one README block with sh in dir, in a process group of its own so that
// an interrupt reaches the whole pipeline, as Ctrl-C in a terminal does.
type shell struct {
	cmd  *exec.Cmd
	out  syncBuffer
	done chan struct{} // closed when the block has ended; err is then its end
	err  error
}

func startShell(t *testing.T, ctx context.Context, dir, script string) *shell {
	t.Helper()
	s := &shell{done: make(chan struct{})}
	s.cmd = exec.CommandContext(ctx, "sh", "-c", script)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Cancel = func() error { return syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) }
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("sh -c %q: %v", script, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	})
	return s
}

// interrupt sends SIGINT to the block's process group and waits for it to end.
func (s *shell) interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the block did not end on an interrupt; output:\n%s", s.out.String())
	}
}

// runShell runs one README block to its end and returns its output.
func runShell(t *testing.T, ctx context.Context, dir, script string) string {
	t.Helper()
	s := startShell(t, ctx, dir, script)
	<-s.done
	if err := s.err; err != nil {
		t.Fatalf("sh -c %q: %v; output:\n%s", script, err, s.out.String())
	}
	return s.out.String()
}

// published decodes the 201 answers a publish block printed.
func published(t *testing.T, out string) []struct {
	Room, Epoch, ID string
	Seq             int64
} {
	t.Helper()
	var got []struct {
		Room, Epoch, ID string
		Seq             int64
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var a struct {
			Room, Epoch, ID string
			Seq             int64
		}
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("a publish answered %q: %v", out, err)
		}
		got = append(got, a)
	}
	return got
}

// sseFrame is one frame of an SSE stream as curl prints it.
type sseFrame struct{ id, event, data string }

// sseFrames splits what a stream printed into its frames, leaving out comments and
// the retry frame.
func sseFrames(out string) []sseFrame {
	var frames []sseFrame
	for _, block := range strings.Split(out, "\n\n") {
		var f sseFrame
		for _, line := range strings.Split(block, "\n") {
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				f.id = v
			case "event":
				f.event = v
			case "data":
				f.data = v
			}
		}
		if f.id != "" || f.data != "" {
			frames = append(frames, f)
		}
	}
	return frames
}

// TestNewcomerWalk runs the README's tour as a newcomer would: the gateway started
// as the README says (embedded log, loopback, no keys), the tour's own curl blocks,
// and a resume with the id the stream printed, which must give exactly the event
// published while away, then live ones, and no resync.
func TestNewcomerWalk(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("curl: %v; CI=true requires the newcomer's walk to run", err)
		}
		t.Skip("curl is not installed")
	}
	blocks, err := tourBlocks(filepath.Join(repoRoot, "README.md"), tourSection)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("the tour %q has %d sh blocks, want 4 (subscribe, publish, publish while away, resume): %q", tourSection, len(blocks), blocks)
	}
	const readmeBase = "http://127.0.0.1:8080"
	for i, b := range blocks {
		if !strings.Contains(b, readmeBase+"/rooms/42/events") {
			t.Fatalf("tour block %d does not talk to %s/rooms/42/events: %q", i+1, readmeBase, b)
		}
	}
	if strings.Contains(blocks[3], "k3x9q2ab") {
		t.Fatalf("the resume block hard-codes an epoch: %q", blocks[3])
	}

	p := startGateway(t)
	for i := range blocks {
		blocks[i] = strings.ReplaceAll(blocks[i], readmeBase, p.Public)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	log := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "stream.log"))
		return string(b)
	}

	// 1. Subscribe and keep it running.
	sub := startShell(t, ctx, dir, blocks[0])
	polltest.Eventually(t, 5*time.Second, "the subscriber's anchor in stream.log", func() bool {
		return strings.Contains(log(), "event: anchor")
	})

	// 2. Publish two events.
	first := published(t, runShell(t, ctx, dir, blocks[1]))
	if len(first) != 2 || first[0].Seq != 1 || first[1].Seq != 2 || first[0].Epoch == "" || first[1].Epoch != first[0].Epoch {
		t.Fatalf("the two publishes answered %+v, want seqs 1 and 2 of one epoch", first)
	}
	epoch := first[0].Epoch
	polltest.Eventually(t, 5*time.Second, "both events in stream.log", func() bool {
		return strings.Contains(log(), "id: "+epoch+":2\n")
	})
	var ids []string
	for _, f := range sseFrames(log()) {
		ids = append(ids, f.id)
	}
	if want := []string{"0", epoch + ":1", epoch + ":2"}; !slices.Equal(ids, want) {
		t.Fatalf("the subscriber got ids %q, want %q; stream:\n%s", ids, want, log())
	}

	// 3. Ctrl-C, then publish while away.
	sub.interrupt(t)
	away := published(t, runShell(t, ctx, dir, blocks[2]))
	if len(away) != 1 || away[0].ID != epoch+":3" {
		t.Fatalf("the publish while away answered %+v, want id %s:3", away, epoch)
	}

	// 4. Resume with the id the stream gave: the missed event, then live.
	resume := startShell(t, ctx, dir, blocks[3])
	polltest.Eventually(t, 5*time.Second, "the missed event on the resumed stream", func() bool {
		return strings.Contains(resume.out.String(), "id: "+epoch+":3\n")
	})
	res, err := http.Post(p.Public+"/rooms/42/events", "application/json", strings.NewReader(`{"text":"live"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("a live publish answered %s", res.Status)
	}
	polltest.Eventually(t, 5*time.Second, "the live event on the resumed stream", func() bool {
		return strings.Contains(resume.out.String(), "id: "+epoch+":4\n")
	})
	resume.interrupt(t)
	out := resume.out.String()
	if !strings.Contains(out, "resuming after "+epoch+":2\n") {
		t.Errorf("the resume block did not take the id %s:2 from the stream; output:\n%s", epoch, out)
	}
	var got []sseFrame
	for _, f := range sseFrames(out) {
		if f.id != "" {
			got = append(got, f)
		}
	}
	if len(got) != 2 || got[0].id != epoch+":3" || got[1].id != epoch+":4" || got[0].event != "" || got[1].event != "" ||
		!strings.Contains(got[0].data, `"body":{"text":"while you were away"}`) {
		t.Fatalf("the resumed stream got %+v, want exactly %s:3 (the missed event) and %s:4 (live), no resync or anchor; output:\n%s", got, epoch, epoch, out)
	}
}
