package polltest

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

func TestUntil(t *testing.T) {
	n := 0
	if err := Until(10*time.Second, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Errorf("Until: %v after %d calls, want nil after 3", err, n)
	}
	cause := errors.New("still wrong")
	err := Until(0, func() error { return cause })
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "not within 0s") {
		t.Errorf("Until past its bound: %v, want the check's error and the bound", err)
	}
	if err := Until(0, func() bool { return false }); err == nil {
		t.Error("a predicate that never holds: nil error")
	}
}
