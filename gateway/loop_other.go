//go:build !linux

package gateway

import (
	"errors"
	"net"
	"os"
	"time"
)

// IdleLoopSupported reports whether this platform has the event loop that serves
// idle connections without a goroutine each (Config.IdleLoop): Linux's epoll only.
const IdleLoopSupported = false

// Without the loop, nothing below runs: Config refuses IdleLoopOn.
const (
	evIn  = 1
	evOut = 4
	evHup = 8
)

var errNoLoop = errors.New("idle loop: not on this platform")

type poller struct{ l *loop }

func newPoller(l *loop) *poller                     { return &poller{l: l} }
func (p *poller) add(*conn) error                   { return errNoLoop }
func (p *poller) wake(*conn)                        {}
func (p *poller) remove(*conn)                      {}
func (p *poller) readBuf() []byte                   { return nil }
func writeNB(int, []byte) (int, error)              { return 0, errNoLoop }
func (p *poller) writev(int, [][]byte) (int, error) { return 0, errNoLoop }
func readNB(int, []byte) (int, error)               { return 0, errNoLoop }

func adopt(net.Conn) (int, error)                    { return -1, errNoLoop }
func writeBlocking(int, []byte, time.Duration) error { return errNoLoop }
func closeFD(int) error                              { return errNoLoop }
func dupSocket(int) (*os.File, error)                { return nil, errNoLoop }
