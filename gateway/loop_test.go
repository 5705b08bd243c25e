package gateway_test

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/polltest"
)

// The idle loop's tests. Each runs on both paths a stream can be served on: the
// event-loop workers (on) and a goroutine per connection (off). What a client sees
// must not depend on the path, so both run the same assertions unless a comment
// says why a path differs.

// onBothPaths runs test as two subtests, on the idle loop and off it. The loop's
// subtest is skipped only where the platform has no loop.
func onBothPaths(t *testing.T, test func(t *testing.T, path gateway.IdleLoop)) {
	for _, path := range []gateway.IdleLoop{gateway.IdleLoopOn, gateway.IdleLoopOff} {
		t.Run(path.String(), func(t *testing.T) {
			if path == gateway.IdleLoopOn && !gateway.IdleLoopSupported {
				t.Skip("no idle loop on this platform")
			}
			test(t, path)
		})
	}
}

// awaitOnLoop waits, on the idle loop, until the connection from addr ("" for any)
// has left net/http, so that what the test does next meets the loop's worker and
// not the stream's request goroutine. Off the loop there is nothing to wait for.
func (p *pod) awaitOnLoop(t *testing.T, path gateway.IdleLoop, addr string) {
	t.Helper()
	if path != gateway.IdleLoopOn {
		return
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-p.hijacked:
			if addr == "" || got == addr {
				return
			}
		case <-timeout:
			t.Fatalf("the stream from %q never went to the idle loop", addr)
		}
	}
}

// awaitConnClosed waits until the pod closed the connection from addr.
func (p *pod) awaitConnClosed(t *testing.T, addr string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-p.closedConns:
			if got == addr {
				return
			}
		case <-timeout:
			t.Fatalf("the pod never closed the connection from %s", addr)
		}
	}
}

// awaitNoStreams waits until the pod's metrics count no open stream.
func (p *pod) awaitNoStreams(t *testing.T) {
	t.Helper()
	polltest.Eventually(t, 10*time.Second, "roomcast_streams_open back to 0", func() error {
		if n := p.metrics(t).Value("roomcast_streams_open"); n != 0 {
			return fmt.Errorf("%v streams open", n)
		}
		return nil
	})
}

// streamResponse reads a stream's response head from br and checks that it is one.
func streamResponse(br *bufio.Reader) (*http.Response, error) {
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, fmt.Errorf("stream response: %w", err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		res.Body.Close()
		return nil, fmt.Errorf("stream response: %d %q, want 200 and an event stream", res.StatusCode, ct)
	}
	return res, nil
}

// openStream sends a GET of path and reads the stream's response head; its body is
// left unread.
func (rc *rawConn) openStream(path string) *http.Response {
	rc.t.Helper()
	rc.head(http.MethodGet, path)
	res, err := streamResponse(rc.br)
	if err != nil {
		rc.t.Fatal(err)
	}
	return res
}

// liveHeap is the heap still reachable after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestLoopClosesAPeerThatStopsReading: a client that stops reading while large
// events are published fills the socket's buffers; once the socket has taken no
// byte for the write timeout the pod drops the connection (write_failed, not the
// slow-consumer rule: the queue is far larger than what is published). When the
// client reads again it gets whole frames in order, then a broken end (never a
// clean one, which would tell it the stream was over), and resuming from the last
// frame it read loses nothing.
func TestLoopClosesAPeerThatStopsReading(t *testing.T) {
	onBothPaths(t, func(t *testing.T, path gateway.IdleLoop) {
		const room, maxEvents = "stall", 2000
		p := newPod(t, podConfig{history: maxEvents, queue: 100000, queueBytes: 1 << 30,
			gw: gateway.Config{IdleLoop: path, WriteTimeout: 300 * time.Millisecond}})
		// The client keeps its default receive buffer: one shrunk to a few KiB
		// clamps the window it advertises for good, and what the pod's socket still
		// holds after the drop (up to 4 MiB) would then reach it only by zero-window
		// probes, far too slowly to read to the end.
		rc := dialRaw(t, p.public.Listener.Addr().String())
		res := rc.openStream("/rooms/" + room + "/events")
		addr := rc.c.LocalAddr().String()
		p.awaitOnLoop(t, path, addr)
		before := p.metrics(t)

		body := `"` + strings.Repeat("s", 32<<10) + `"`
		var ids []string
	publish:
		for {
			ids = append(ids, p.publish(t, room, body))
			select {
			case got := <-p.closedConns:
				if got == addr {
					break publish
				}
			default:
			}
			if len(ids) == maxEvents { // 64 MiB: far beyond any socket buffer
				t.Fatalf("the pod kept a client that read nothing through %d events of 32 KiB", len(ids))
			}
		}
		p.awaitNoStreams(t)
		after := p.metrics(t)
		moved(t, before, after, 1, "roomcast_streams_closed_total", "reason", "write_failed")
		moved(t, before, after, 0, "roomcast_streams_closed_total", "reason", "slow_consumer")
		moved(t, before, after, 0, "roomcast_streams_closed_total", "reason", "client_gone")

		// The client reads again: what the buffers held, then the end.
		if err := rc.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		s := readStream(t, res, func() { rc.c.Close() })
		last := ""
		var got uint64
		for _, f := range s.waitEnd() {
			if f.hasID {
				last = f.id
			}
			if f.event == gatewaytest.AnchorType || f.data == "" {
				continue
			}
			if seq := f.seq(t); seq != got+1 {
				t.Fatalf("after %d events the client read seq %d", got, seq)
			}
			got++
		}
		var ne net.Error
		switch err := s.err; {
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatalf("the client's read of the dropped stream timed out after %d events: the socket stayed open", got)
		case !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET):
			t.Fatalf("the dropped stream ended with %v after %d events, want an unexpected EOF or a reset", err, got)
		}
		if got >= uint64(len(ids)) {
			t.Fatalf("the client read all %d events: it was never stalled", got)
		}
		if last == "" {
			t.Fatal("the client read neither the anchor nor an event")
		}
		t.Logf("%d events of 32 KiB published, %d read before the drop", len(ids), got)

		r := p.subscribe(t, room, "", "Last-Event-ID", last)
		for want := got + 1; want <= uint64(len(ids)); want++ {
			if f := r.next(); f.seq(t) != want {
				t.Fatalf("resumed from %s: seq %d, want %d", last, f.seq(t), want)
			}
		}
	})
}

// TestLoopHalfCloseEndsTheStream: a client that shuts down its sending side after
// its request is gone (EventSource never half-closes; a proxy that does has dropped
// its client). The pod ends the stream as client_gone, ends the response cleanly
// after what it had sent, and closes the connection.
func TestLoopHalfCloseEndsTheStream(t *testing.T) {
	onBothPaths(t, func(t *testing.T, path gateway.IdleLoop) {
		p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: path}})
		rc := dialRaw(t, p.public.Listener.Addr().String())
		s := readStream(t, rc.openStream("/rooms/half/events"), func() { rc.c.Close() })
		expectAnchor(t, s)
		addr := rc.c.LocalAddr().String()
		p.awaitOnLoop(t, path, addr)
		id := p.publish(t, "half", `{"n":1}`)
		if f := s.next(); f.id != id {
			t.Fatalf("got %+v, want event %s", f, id)
		}
		before := p.metrics(t)

		if err := rc.c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		for _, f := range s.waitEnd() {
			if f.data != "" {
				t.Fatalf("after the half-close the stream sent %+v", f)
			}
		}
		if s.err != io.EOF {
			t.Fatalf("the response ended with %v, want its clean end", s.err)
		}
		rc.closed()
		p.awaitConnClosed(t, addr)
		p.awaitNoStreams(t)
		after := p.metrics(t)
		moved(t, before, after, 1, "roomcast_streams_closed_total", "reason", "client_gone")
		moved(t, before, after, 0, "roomcast_streams_closed_total", "reason", "write_failed")
	})
}

// TestLoopPeerSendingGarbage: a client that keeps sending bytes after its request
// (a broken proxy, an attacker) gets its stream as if it had sent nothing: events
// published while it floods arrive, in order, and what it sends is not kept.
// Closing the connection ends the stream.
func TestLoopPeerSendingGarbage(t *testing.T) {
	onBothPaths(t, func(t *testing.T, path gateway.IdleLoop) {
		const rounds, perRound = 4, 25
		const flood, heapSlack = 16 << 20, 4 << 20
		p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: path, Heartbeat: 200 * time.Millisecond}})
		rc := dialRaw(t, p.public.Listener.Addr().String())
		s := readStream(t, rc.openStream("/rooms/junk/events"), func() { rc.c.Close() })
		expectAnchor(t, s)
		addr := rc.c.LocalAddr().String()
		p.awaitOnLoop(t, path, addr)

		heap := liveHeap()
		stop := make(chan struct{})
		flooded := make(chan int64, 1)
		go func() {
			junk := make([]byte, 64<<10)
			_, _ = rand.Read(junk)
			var n int64
			defer func() { flooded <- n }()
			for n < flood {
				select {
				case <-stop:
					return
				default:
				}
				_ = rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				m, err := rc.c.Write(junk)
				n += int64(m)
				if err != nil {
					return
				}
			}
		}()
		for round := range rounds {
			var ids []string
			for i := range perRound {
				ids = append(ids, p.publish(t, "junk", fmt.Sprintf(`{"round":%d,"i":%d}`, round, i)))
			}
			for _, id := range ids {
				if f := s.next(); f.id != id {
					t.Fatalf("round %d: got %+v, want event %s", round, f, id)
				}
			}
		}
		if path == gateway.IdleLoopOff {
			// net/http reads nothing of a connection past the first byte after the
			// request while its handler runs: the kernel's buffers fill and the
			// client's writes block, which this ends.
			close(stop)
			_ = rc.c.SetWriteDeadline(time.Now())
		}
		var sent int64
		select {
		case sent = <-flooded:
		case <-time.After(30 * time.Second):
			t.Fatal("the client's flood never ended")
		}
		if path == gateway.IdleLoopOn && sent != flood {
			t.Fatalf("the loop took %d KiB of the client's %d KiB and stopped reading", sent>>10, flood>>10)
		}
		// The flood is not kept.
		if grew := int64(liveHeap()) - int64(heap); grew > heapSlack {
			t.Fatalf("the live heap grew by %d KiB while the client sent %d KiB", grew>>10, sent>>10)
		}
		t.Logf("the client sent %d KiB", sent>>10)

		before := p.metrics(t)
		rc.c.Close()
		p.awaitConnClosed(t, addr)
		p.awaitNoStreams(t)
		after := p.metrics(t)
		gone := after.Value("roomcast_streams_closed_total", "reason", "client_gone") - before.Value("roomcast_streams_closed_total", "reason", "client_gone")
		failed := after.Value("roomcast_streams_closed_total", "reason", "write_failed") - before.Value("roomcast_streams_closed_total", "reason", "write_failed")
		switch {
		case path == gateway.IdleLoopOn && (gone != 1 || failed != 0):
			// The loop reads the socket to its end and sees the client go.
			t.Fatalf("closes counted: client_gone %v, write_failed %v; want the client gone", gone, failed)
		case gone+failed != 1:
			// Off the loop nothing reads the socket any more (see above): the close
			// is seen by the next heartbeat's write.
			t.Fatalf("closes counted: client_gone %v, write_failed %v; want one", gone, failed)
		}
		t.Logf("the close counted as client_gone %v, write_failed %v", gone, failed)
	})
}
