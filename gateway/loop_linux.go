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
	"unsafe"

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

// poller is one event-loop worker: its connections, the run queue of connections
// woken by their rooms, and an epoll set of their sockets. Two goroutines serve it
// while it has connections, none when it has none (its descriptors closed, so an
// idle pod holds none): the worker, which alone touches its connections and waits
// on a channel (a room's wake-up hands the worker straight to the waking
// goroutine's processor, as a channel send to a connection's goroutine does on the
// goroutine path), and a watcher blocked in epoll_wait, which hands the sockets'
// news to the worker.
type poller struct {
	l *loop

	mu      sync.Mutex
	running bool
	epfd    int
	evfd    int     // wakes the watcher out of epoll_wait when the worker stops
	runq    []*conn // woken connections, each at most once (conn.queued)
	adds    []*conn // connections handed to the worker, not yet in its set
	news    []sockNews
	// sleeping is set while the worker may wait on kick: a wake-up sends only
	// then, once.
	sleeping atomic.Bool
	kick     chan struct{}

	// The worker's own, touched by its goroutine alone.
	conns []*conn // every connection of the worker, conn.idx its place
	byFD  []*conn // the same, by socket descriptor
	gen   int32   // the last generation given to a connection (conn.gen)
	batch []*conn // the run queue being served
	seen  []sockNews
	swept time.Time // when a slice of the connections was last swept (timers)
	sweep int       // where the next slice starts in conns
	rbuf  []byte    // reads from the sockets (readBuf)
	iov   []unix.Iovec
}

// sockNews is what epoll said of a connection's socket: the descriptor and the
// connection's generation on it (a descriptor closed and reused is another
// connection's, whose generation differs), and the events.
type sockNews struct {
	fd, gen int32
	events  uint32
}

func newPoller(l *loop) *poller {
	return &poller{l: l, epfd: -1, evfd: -1, kick: make(chan struct{}, 1)}
}

// add hands c, whose socket is c.fd, to the worker, starting it if it is idle.
func (p *poller) add(c *conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		if err := p.openLocked(); err != nil {
			return err
		}
		p.running = true
		p.l.workers.Add(2)
		go p.run()
		go p.watch(p.epfd, p.evfd)
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
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd), Pad: -1}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return fmt.Errorf("idle loop: epoll_ctl eventfd: %w", err)
	}
	p.epfd, p.evfd = epfd, evfd
	return nil
}

// wake puts c on the run queue, once, and wakes the worker if it waits. It never
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

// signalLocked wakes the worker, when it may be waiting.
func (p *poller) signalLocked() {
	if p.running && p.sleeping.CompareAndSwap(true, false) {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// watch is the watcher's goroutine: it waits in epoll_wait for the sockets' news
// and hands it to the worker, until the worker stops (evfd), then closes the
// descriptors of the set.
func (p *poller) watch(epfd, evfd int) {
	defer p.l.workers.Done()
	defer unix.Close(evfd)
	defer unix.Close(epfd)
	evs := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(epfd, evs, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			p.l.s.cfg.Logger.Error("idle loop: epoll_wait failed", "err", err)
			return
		}
		stop := false
		p.mu.Lock()
		for i := range evs[:n] {
			e := &evs[i]
			if e.Pad < 0 {
				stop = true
				continue
			}
			p.news = append(p.news, sockNews{fd: e.Fd, gen: e.Pad, events: e.Events})
		}
		p.signalLocked()
		p.mu.Unlock()
		if stop {
			return
		}
	}
}

// run is the worker's goroutine.
func (p *poller) run() {
	defer p.l.workers.Done()
	p.swept = time.Now()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if !p.takeAdds() {
			return
		}
		p.mu.Lock()
		p.seen, p.news = p.news, p.seen[:0]
		p.batch, p.runq = p.runq, p.batch[:0]
		p.mu.Unlock()
		for _, n := range p.seen {
			if int(n.fd) < len(p.byFD) {
				if c := p.byFD[n.fd]; c != nil && c.gen == n.gen {
					c.ev.Or(n.events)
					c.run()
				}
			}
		}
		for i, c := range p.batch {
			p.batch[i] = nil
			c.queued.Store(false)
			c.run()
		}
		now := time.Now()
		if now.Sub(p.swept) >= p.l.period/sweepSlices {
			p.swept = now
			p.sweepSlice(now)
			p.l.trim(now)
		}
		p.sleeping.Store(true)
		p.mu.Lock()
		busy := len(p.runq) > 0 || len(p.adds) > 0 || len(p.news) > 0
		p.mu.Unlock()
		if busy {
			p.sleeping.Store(false)
			continue
		}
		t.Reset(p.l.period/sweepSlices - time.Since(p.swept))
		select {
		case <-p.kick:
		case <-t.C:
		}
		p.sleeping.Store(false)
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
		// The watcher closes the set's descriptors as it leaves.
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(p.evfd, one[:])
		p.epfd, p.evfd = -1, -1
		p.news = p.news[:0]
		p.mu.Unlock()
		return false
	}
	p.mu.Unlock()
	for _, c := range adds {
		p.gen = max(p.gen+1, 0) // never negative: the watcher's stop is -1
		c.gen = p.gen
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd), Pad: c.gen}
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

// writev writes what it can of parts to fd without blocking (writev), as writeNB,
// on the worker: its vector is the worker's, so that a write allocates none.
func (p *poller) writev(fd int, parts [][]byte) (int, error) {
	v := p.iov[:0]
	for _, b := range parts {
		if len(b) > 0 {
			e := unix.Iovec{Base: &b[0]}
			e.SetLen(len(b))
			v = append(v, e)
		}
	}
	p.iov = v
	if len(v) == 0 {
		return 0, nil
	}
	defer clear(v) // it keeps no buffer alive
	return nonBlocking(func() (int, error) {
		n, _, errno := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	})
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
