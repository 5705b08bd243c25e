package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingConn records every write it is given, whole.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
	closed bool
}

func (c *recordingConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func TestCorkConnSendsABatchInOneWrite(t *testing.T) {
	rec := &recordingConn{}
	c := &corkConn{Conn: rec}
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	c.cork()
	for _, s := range []string{"b", "cc", "ddd"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("corked write %q: %d %v", s, n, err)
		}
	}
	if len(rec.writes) != 1 {
		t.Fatalf("corked writes reached the connection: %q", rec.writes)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("e")); err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(rec.writes))
	for i, w := range rec.writes {
		got[i] = string(w)
	}
	if strings.Join(got, "|") != "a|bccddd|e" {
		t.Fatalf("writes %q, want a, then the batch in one write, then e", got)
	}
	// Nothing held: uncork writes nothing.
	c.cork()
	if err := c.uncork(); err != nil || len(rec.writes) != 3 {
		t.Fatalf("empty uncork: %v, %d writes", err, len(rec.writes))
	}
	// Closed while corked (the library answers a close from the reading goroutine):
	// what was held goes out first.
	c.cork()
	if _, err := c.Write([]byte("close reply")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 4 || string(rec.writes[3]) != "close reply" || !rec.closed {
		t.Fatalf("closed while corked: writes %q, closed %v", rec.writes, rec.closed)
	}
}

// A peer that reads nothing cannot hold the batch's write past the write timeout.
func TestCorkConnUncorkEndsAtTheDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close() // never read
	srv := <-accepted
	defer srv.Close()
	c := &corkConn{Conn: srv, timeout: 200 * time.Millisecond}
	c.cork()
	if _, err := c.Write(make([]byte, 16<<20)); err != nil { // far beyond the socket buffers
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.uncork() }()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("uncork to a stalled peer: %v, want the write deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("uncork to a stalled peer did not end at its deadline")
	}
	if c.held != nil || c.bp != nil {
		t.Fatalf("kept the batch's buffer after it: %d bytes", cap(c.held))
	}
	// The socket was closed: nothing more goes after a frame that went out in part.
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("a write after a timed-out one succeeded")
	}
}

// Every write renews a deadline that has run down by a quarter, so a connection idle
// for longer than the timeout can still write (a pong, a close frame).
func TestCorkConnRenewsTheDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _, _ = io.Copy(io.Discard, b) }()
	c := &corkConn{Conn: a, timeout: 50 * time.Millisecond}
	for i := range 3 {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		time.Sleep(60 * time.Millisecond) // longer than the timeout: the deadline has passed
	}
}
