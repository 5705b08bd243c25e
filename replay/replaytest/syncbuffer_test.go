package replaytest

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestSyncBuffer: writers on several goroutines and a reader at the same time (the
// race detector checks the locking), and the buffer ends with every write whole.
func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var _ io.Writer = &b
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", w, i)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_ = b.String()
		}
	}()
	wg.Wait()
	<-done
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	if !strings.Contains(b.String(), "w3-99\n") {
		t.Fatalf("a write is missing: %q", b.String()[:40])
	}
}
