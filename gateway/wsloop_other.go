//go:build !linux

package gateway

import (
	"errors"
	"os"
)

// dupSocket is never called without the loop (see loop_other.go).
func dupSocket(int) (*os.File, error) { return nil, errors.New("websocket: no idle loop here") }
