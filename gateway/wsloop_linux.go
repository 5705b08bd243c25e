//go:build linux

package gateway

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dupSocket returns a duplicate of the loop's descriptor of a socket, on the
// runtime's poller (reads park the goroutine, not a thread): it keeps the socket
// open once the loop has closed its own.
func dupSocket(fd int) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("websocket: dup: %w", err)
	}
	return os.NewFile(uintptr(dup), "socket"), nil
}
