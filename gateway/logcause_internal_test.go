package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/roomcast/roomcast/replay"
)

// TestLogCause: the cause a 503 gives is the few words that say what went wrong, not
// the chain of wrappers around them.
func TestLogCause(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", fmt.Errorf("replay: append %q: %w", "r", fmt.Errorf("%w: %w", replay.ErrUnavailable, refused)), "connection refused"},
		{"not connected", fmt.Errorf("replay: append %q: %w", "r", fmt.Errorf("%w: not connected to %v yet", replay.ErrUnavailable, []string{"127.0.0.1:6379"})), "not connected to [127.0.0.1:6379] yet"},
		{"bare sentinel", replay.ErrUnavailable, "unreachable"},
		{"deadline", fmt.Errorf("%w: %w", replay.ErrUnavailable, context.DeadlineExceeded), "no answer in time"},
		{"closed", fmt.Errorf("x: %w", replay.ErrClosed), "the log is closed"},
		{"redis words", fmt.Errorf("%w: %w", replay.ErrUnavailable, errors.New("LOADING Redis is loading the dataset in memory")), "LOADING Redis is loading the dataset in memory"},
		{"control characters", errors.New("a\r\nb"), "ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := logCause(tc.err); got != tc.want {
				t.Errorf("logCause = %q, want %q", got, tc.want)
			}
		})
	}
}
