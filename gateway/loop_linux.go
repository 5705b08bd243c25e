//go:build linux

package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// IdleLoopSupported reports whether this platform has the event loop that serves
// idle connections without a goroutine each (Config.IdleLoop): Linux's epoll only.
const IdleLoopSupported = true

// Socket events a connection on the loop is told of (conn.ev).
const (
	evIn  = unix.EPOLLIN
	evOut = unix.EPOLLOUT
	evHup = unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR
)

// poller is one event-loop worker: an epoll set of sockets, an eventfd that wakes
// it, its connections, and the run queue of connections woken by their rooms. Its
// goroutine runs only while it has connections; it starts with the first and ends
// with the last, closing its descriptors, so an idle pod holds none.
type poller struct {
	l *loop

	mu      sync.Mutex
	running bool
	epfd    int
	evfd    int
	runq    []*conn // woken connections, each at most once (conn.queued)
	adds    []*conn // connections handed to the worker, not yet in its set
	// sleeping is set while the worker may be in epoll_wait: a wake-up writes the
	// eventfd only then, once.
	sleeping atomic.Bool

	// The worker's own, touched by its goroutine alone.
	conns []*conn           // every connection of the worker, conn.idx its place
	byFD  []*conn           // the same, by socket descriptor
	batch []*conn           // the run queue being served
	evs   []unix.EpollEvent // epoll_wait's answers
	swept time.Time         // when a slice of the connections was last swept (timers)
	sweep int               // where the next slice starts in conns
	rbuf  []byte            // reads from the sockets (readBuf)
}

func newPoller(l *loop) *poller { return &poller{l: l, epfd: -1, evfd: -1} }

// add hands c, whose socket is c.fd, to the worker, starting it if it is idle.
func (p *poller) add(c *conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		if err := p.openLocked(); err != nil {
			return err
		}
		p.running = true
		p.l.workers.Add(1)
		go p.run()
	}
	p.adds = append(p.adds, c)
	p.signalLocked()
	return nil
}

func (p *poller) openLocked() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("idle loop: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return fmt.Errorf("idle loop: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return fmt.Errorf("idle loop: epoll_ctl eventfd: %w", err)
	}
	p.epfd, p.evfd = epfd, evfd
	if p.evs == nil {
		p.evs = make([]unix.EpollEvent, 128)
	}
	return nil
}

// wake puts c on the run queue, once, and wakes the worker if it sleeps. It never
// blocks: rooms call it under their lock (rooms.Waker).
func (p *poller) wake(c *conn) {
	if !c.queued.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	p.runq = append(p.runq, c)
	p.signalLocked()
	p.mu.Unlock()
}

// signalLocked wakes the worker out of epoll_wait, when it may be in it.
func (p *poller) signalLocked() {
	if p.running && p.sleeping.CompareAndSwap(true, false) {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(p.evfd, one[:])
	}
}

// run is the worker's goroutine.
func (p *poller) run() {
	defer p.l.workers.Done()
	p.swept = time.Now()
	for {
		if !p.takeAdds() {
			return
		}
		timeout := p.l.period/sweepSlices - time.Since(p.swept)
		ms := max(int(timeout/time.Millisecond), 0)
		p.sleeping.Store(true)
		p.mu.Lock()
		if len(p.runq) > 0 || len(p.adds) > 0 {
			ms = 0
		}
		p.mu.Unlock()
		n, err := unix.EpollWait(p.epfd, p.evs, ms)
		p.sleeping.Store(false)
		if err != nil && !errors.Is(err, unix.EINTR) {
			p.l.s.cfg.Logger.Error("idle loop: epoll_wait failed", "err", err)
			n = 0
		}
		for i := 0; i < n; i++ {
			e := &p.evs[i]
			if int(e.Fd) == p.evfd {
				var b [8]byte
				_, _ = unix.Read(p.evfd, b[:])
				continue
			}
			if int(e.Fd) < len(p.byFD) && p.byFD[e.Fd] != nil {
				c := p.byFD[e.Fd]
				c.ev.Or(e.Events)
				c.run()
			}
		}
		p.mu.Lock()
		p.batch, p.runq = p.runq, p.batch[:0]
		p.mu.Unlock()
		for i, c := range p.batch {
			p.batch[i] = nil
			c.queued.Store(false)
			c.run()
		}
		if now := time.Now(); now.Sub(p.swept) >= p.l.period/sweepSlices {
			p.swept = now
			p.sweepSlice(now)
			p.l.trim(now)
		}
	}
}

// sweepSlices is how many slices a worker sweeps its connections in, one slice
// every loop period / sweepSlices: every connection is swept once a period, and no
// sweep holds the worker from its sockets for long (10,000 connections cost it
// milliseconds at once, a sixteenth of that a slice).
const sweepSlices = 16

// sweepSlice runs the timers of the next slice of the worker's connections.
func (p *poller) sweepSlice(now time.Time) {
	n := (len(p.conns) + sweepSlices - 1) / sweepSlices
	for range n {
		if len(p.conns) == 0 {
			return
		}
		if p.sweep >= len(p.conns) {
			p.sweep = 0
		}
		c := p.conns[p.sweep]
		c.sweep(now)
		if p.sweep < len(p.conns) && p.conns[p.sweep] == c {
			p.sweep++ // else c ended, and the one that took its place is next
		}
	}
}

// takeAdds brings the connections handed to the worker into its set and serves
// each once. It reports false, having closed the worker's descriptors, when the
// worker has no connection left and none coming: its goroutine ends.
func (p *poller) takeAdds() bool {
	p.mu.Lock()
	adds := p.adds
	p.adds = nil
	if len(adds) == 0 && len(p.conns) == 0 && len(p.runq) == 0 {
		p.running = false
		unix.Close(p.epfd)
		unix.Close(p.evfd)
		p.epfd, p.evfd = -1, -1
		p.mu.Unlock()
		return false
	}
	p.mu.Unlock()
	for _, c := range adds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}
		if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
			c.attached(-1)
			c.finish(reasonFor(c.ctx, fmt.Errorf("idle loop: epoll_ctl: %w", err)))
			continue
		}
		if c.fd >= len(p.byFD) {
			p.byFD = append(p.byFD, make([]*conn, c.fd+1-len(p.byFD)+len(p.byFD)/4)...)
		}
		p.byFD[c.fd] = c
		c.attached(len(p.conns))
		p.conns = append(p.conns, c)
		p.l.open.Add(1)
		p.l.tookOn(time.Now())
		c.run()
	}
	return true
}

// remove takes c out of the worker's set; the worker's goroutine calls it.
func (p *poller) remove(c *conn) {
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	p.byFD[c.fd] = nil
	last := len(p.conns) - 1
	if i := c.idx; i >= 0 && i <= last && p.conns[i] == c {
		p.conns[i] = p.conns[last]
		p.conns[i].idx = i
		p.conns[last] = nil
		p.conns = p.conns[:last]
		p.l.open.Add(-1)
	}
	c.idx = -1
}

// writeNB writes what it can of b to fd without blocking: the count, and an error
// other than "try again".
func writeNB(fd int, b []byte) (int, error) {
	return nonBlocking(func() (int, error) { return unix.Write(fd, b) })
}

// writevNB writes what it can of parts to fd without blocking (writev), as
// writeNB.
func writevNB(fd int, parts [][]byte) (int, error) {
	return nonBlocking(func() (int, error) { return unix.Writev(fd, parts) })
}

// nonBlocking makes a call on a non-blocking descriptor, again when a signal
// interrupted it; "try again" is 0 bytes and no error.
func nonBlocking(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, nil
		}
		return 0, err
	}
}

// adopt takes nc's socket for the loop: a non-blocking duplicate of its
// descriptor, nc itself closed (which closes its descriptor, not the socket).
func adopt(nc net.Conn) (int, error) {
	raw := nc
	if lc, ok := nc.(*limitedConn); ok {
		raw = lc.Conn
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("idle loop: a %T is not a socket", raw)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("idle loop: %w", err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, fmt.Errorf("idle loop: %w", err)
	}
	if derr != nil {
		return -1, fmt.Errorf("idle loop: dup: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("idle loop: %w", err)
	}
	_ = nc.Close()
	return fd, nil
}

// writeBlocking writes all of b to fd within timeout, the calling goroutine parked
// on the runtime's poller (not holding a thread) through a duplicate of fd: for the
// rare writes that may wait (a history read's, the last words of a connection
// whose socket is full).
func writeBlocking(fd int, b []byte, timeout time.Duration) error {
	f, err := dupSocket(fd)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("idle loop: %w", err)
	}
	_, err = f.Write(b)
	return err
}

// dupSocket returns a duplicate of the loop's descriptor of a socket, on the
// runtime's poller (its reads and writes park the goroutine, not a thread); it
// keeps the socket open once the loop has closed its own.
func dupSocket(fd int) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("idle loop: dup: %w", err)
	}
	return os.NewFile(uintptr(dup), "socket"), nil
}

func closeFD(fd int) error { return unix.Close(fd) }

// readBuf is the worker's buffer for reads from its sockets.
func (p *poller) readBuf() []byte {
	if p.rbuf == nil {
		p.rbuf = make([]byte, 4<<10)
	}
	return p.rbuf
}

// readNB reads what is there, without blocking: n = 0 with a nil error is "nothing
// now"; errPeerClosed is the peer's end of writing.
func readNB(fd int, b []byte) (int, error) {
	eof := false
	n, err := nonBlocking(func() (int, error) {
		n, err := unix.Read(fd, b)
		eof = err == nil && n == 0
		return n, err
	})
	if eof {
		return 0, errPeerClosed
	}
	return n, err
}
