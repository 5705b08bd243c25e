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

// corkConn is the WebSocket connection's net.Conn: corked, its writes are collected;
// uncork sends them, in order, with one write. Writes from other goroutines (the
// library's pongs and closes) keep their place: they queue behind a cork in force.
//
// It also bounds every write to the socket with a deadline, as a stream's writer
// does, renewed once a quarter of it has passed: the connection's writer then hands
// the library contexts without deadlines, which spares a timer per frame.
type corkConn struct {
	net.Conn
	timeout time.Duration // 0: no deadline

	mu       sync.Mutex
	corked   bool
	held     []byte
	deadline time.Time
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
	if c.timeout > 0 {
		now := time.Now()
		if c.deadline.Sub(now) < c.timeout*3/4 {
			c.deadline = now.Add(c.timeout)
			if err := c.Conn.SetWriteDeadline(c.deadline); err != nil {
				return 0, fmt.Errorf("write deadline: %w", err)
			}
		}
	}
	return c.Conn.Write(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was held, within the write deadline.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.write(c.held)
	if cap(c.held) > maxHeld {
		c.held = nil
	} else {
		c.held = c.held[:0]
	}
	return err
}

// maxHeld bounds the buffer a connection keeps between batches; a larger batch's
// buffer is dropped once written.
const maxHeld = 64 << 10

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
