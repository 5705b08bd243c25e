package replaytest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder stands in for a test whose Fatalf ends its goroutine.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = format
	for _, a := range args {
		if e, ok := a.(error); ok {
			r.msg += " " + e.Error()
		}
	}
	r.mu.Unlock()
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, "third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("polled %d times, want 3", n)
	}
	m := 0
	Eventually(t, 10*time.Second, "second call", func() error {
		if m++; m < 2 {
			return errors.New("first")
		}
		return nil
	})
	if m != 2 {
		t.Errorf("polled %d times, want 2", m)
	}

	r := &recorder{TB: t}
	Eventually(r, 0, "never", func() error { return errors.New("still wrong") })
	if !strings.Contains(r.msg, "still wrong") {
		t.Errorf("failure %q does not carry the check's error", r.msg)
	}
	r.msg = ""
	Eventually(r, 0, "never", func() bool { return false })
	if r.msg == "" {
		t.Error("a condition that never holds did not fail the test")
	}
}
