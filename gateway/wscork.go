package gateway

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// coder/websocket flushes every message to the connection on its own: a batch of n
// event frames would cost n writes where an SSE stream's batch costs one. The
// connection it is given is a corkConn, which holds back what is written while the
// writer gathers a batch's frames and sends them in one write when the batch ends.

// corkConn is the WebSocket connection's net.Conn: corked, its writes are collected
// (in a buffer borrowed from bufPool for the batch, so an idle connection holds
// none); uncork sends them, in order, with one write. Writes from other goroutines
// (the library's pongs, pings and close replies) keep their place: they queue
// behind a cork in force, and Close sends what is held before it closes.
//
// It also bounds every write to the socket with a deadline, as a stream's writer
// does, renewed once a quarter of it has passed: the connection's writer then hands
// the library contexts without deadlines, which spares a timer per frame. A write
// that fails (its deadline passed, the peer went away) closes the socket, as the
// library does when a write's context expires: nothing is written after a frame
// that may have gone out in part.
type corkConn struct {
	net.Conn
	timeout time.Duration // 0: no deadline

	mu       sync.Mutex
	corked   bool
	bp       *[]byte // the borrowed buffer while corked
	held     []byte
	deadline time.Time
	broken   error // the first failed write
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	return c.write(p)
}

// write writes p to the socket within the deadline; c.mu is held.
func (c *corkConn) write(p []byte) (int, error) {
	if c.broken != nil {
		return 0, c.broken
	}
	if c.timeout > 0 {
		now := time.Now()
		if c.deadline.Sub(now) < c.timeout*3/4 {
			c.deadline = now.Add(c.timeout)
			if err := c.Conn.SetWriteDeadline(c.deadline); err != nil {
				return 0, c.breakOn(fmt.Errorf("write deadline: %w", err))
			}
		}
	}
	n, err := c.Conn.Write(p)
	if err != nil {
		return n, c.breakOn(err)
	}
	return n, nil
}

// breakOn closes the socket after a failed write and returns err; c.mu is held.
func (c *corkConn) breakOn(err error) error {
	c.broken = err
	_ = c.Conn.Close()
	return err
}

func (c *corkConn) cork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		c.corked = true
		c.bp = bufPool.Get().(*[]byte)
		c.held = (*c.bp)[:0]
	}
}

// uncork writes what was held, within the write deadline, and gives the buffer
// back.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if !c.corked {
		return nil
	}
	c.corked = false
	var err error
	if len(c.held) > 0 {
		_, err = c.write(c.held)
	}
	*c.bp = c.held[:0]
	putBuf(c.bp)
	c.bp, c.held = nil, nil
	return err
}

// Close sends what is held (a close frame the library wrote while the writer was
// corked, say) and closes the socket.
func (c *corkConn) Close() error {
	c.mu.Lock()
	_ = c.flushLocked()
	c.mu.Unlock()
	return c.Conn.Close()
}

// corkWriter hands websocket.Accept a corkConn in place of the hijacked connection.
type corkWriter struct {
	http.ResponseWriter
	timeout time.Duration // the connection's write timeout
	conn    *corkConn
}

func (w *corkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("hijack: %w", err)
	}
	w.conn = &corkConn{Conn: nc, timeout: w.timeout}
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}
