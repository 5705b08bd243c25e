package gateway_test

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
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

// openAnchored opens path's stream on a connection of its own and reads up to its
// anchor, by which the stream has joined its room. It returns an error rather than
// failing a test, for callers that open streams from many goroutines.
func openAnchored(addr, path string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	// The bound on a test that fails by hanging; a passing test never waits for it.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: request: %w", path, err)
	}
	res, err := streamResponse(bufio.NewReader(c))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
	for {
		f, err := dec.NextFrame()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: before its anchor: %w", path, err)
		}
		if f.IsAnchor() {
			break
		}
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting open descriptors: %v", err)
	}
	return len(ents)
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

// TestLoopCleanEndLeavesTheConnectionUsable: a stream the pod ends cleanly (a
// shed: a retry hint and the response's last chunk) either says in its headers
// that the connection closes with it, or leaves the connection to serve the
// client's next request. A keep-alive client (Go's Transport, a proxy's upstream
// pool) reuses a connection whose response ended cleanly unless it was told not
// to, and a request sent into a connection the pod closed fails (a POST is not
// retried).
func TestLoopCleanEndLeavesTheConnectionUsable(t *testing.T) {
	onBothPaths(t, func(t *testing.T, path gateway.IdleLoop) {
		p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: path}})
		rc := dialRaw(t, p.public.Listener.Addr().String())
		res := rc.openStream("/rooms/reuse/events")
		s := readStream(t, res, func() { rc.c.Close() })
		expectAnchor(t, s)
		p.awaitOnLoop(t, path, rc.c.LocalAddr().String())

		if res := do(t, http.MethodPost, p.admin.URL+"/admin/shed?count=1", ""); res.status != http.StatusOK || strings.TrimSpace(res.body) != `{"closed":1}` {
			t.Fatalf("shed: %d %s", res.status, res.body)
		}
		if rest := s.waitEnd(); len(rest) != 1 || rest[0].retry == 0 {
			t.Fatalf("the shed stream ended with %+v, want one retry hint", rest)
		}
		if s.err != io.EOF {
			t.Fatalf("the shed stream ended with %v, want its clean end", s.err)
		}
		if res.Close {
			// Connection: close: the client does not reuse the connection.
			rc.closed()
			return
		}
		rc.head(http.MethodGet, "/healthz")
		next, err := http.ReadResponse(rc.br, nil)
		if err != nil {
			t.Fatalf("the stream ended cleanly and its headers did not say Connection: close, "+
				"yet the next request on its connection got %v", err)
		}
		next.Body.Close()
		if next.StatusCode != http.StatusOK {
			t.Fatalf("the next request on the stream's connection: %d", next.StatusCode)
		}
	})
}

// TestLoopChurnLeavesNothingBehind opens and closes 10,000 streams, 200 at a time,
// each reading its anchor before it closes, one in four abruptly (a reset). Once
// they are gone the process holds no more descriptors, goroutines or heap than
// before, within a small slack (the heap's would miss a leak of 1 KiB per
// connection), and the pod counts every stream closed.
func TestLoopChurnLeavesNothingBehind(t *testing.T) {
	onBothPaths(t, func(t *testing.T, path gateway.IdleLoop) {
		total, batch := 10000, 200
		if testing.Short() {
			total = 2000
		}
		// A leak of 1 KiB per stream shows.
		heapSlack := uint64(total) << 10
		const fdSlack, goroutineSlack = 8, 10
		p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: path}})
		addr := p.public.Listener.Addr().String()
		before := p.metrics(t)
		// The scrape's keep-alive connection is not the streams'.
		http.DefaultClient.CloseIdleConnections()
		// The baseline is taken once the scrape's server side has gone too.
		var fds, goroutines int
		polltest.Eventually(t, 10*time.Second, "a settled baseline", func() bool {
			f, g := openFDs(t), runtime.NumGoroutine()
			settled := f == fds && g == goroutines
			fds, goroutines = f, g
			return settled
		})
		heap := liveHeap()

		// The runtime closes a socket it collects: a connection the pod forgot to
		// close shows as a descriptor only until the next collection. None runs
		// from the last batch until the descriptors are counted.
		restoreGC := sync.OnceFunc(func() {})
		defer func() { restoreGC() }()
		start := time.Now()
		for done := 0; done < total; done += batch {
			if done+batch >= total {
				percent := debug.SetGCPercent(-1)
				restoreGC = sync.OnceFunc(func() { debug.SetGCPercent(percent) })
			}
			errs := make(chan error, batch)
			var wg sync.WaitGroup
			for i := range batch {
				n := done + i
				wg.Go(func() {
					c, err := openAnchored(addr, fmt.Sprintf("/rooms/churn-%d/events", n%8))
					if err != nil {
						errs <- err
						return
					}
					if n%4 == 0 {
						// An abrupt close: a reset, not a FIN.
						if err := c.(*net.TCPConn).SetLinger(0); err != nil {
							errs <- err
						}
					}
					c.Close()
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("stream %d of %d: %v", done, total, err)
			}
		}
		t.Logf("%d streams opened and closed in %s", total, time.Since(start).Round(time.Millisecond))

		settle := time.Now()
		polltest.Eventually(t, 10*time.Second, "the streams, descriptors and goroutines gone", func() error {
			if n := p.rooms.Stats().Members; n != 0 {
				return fmt.Errorf("%d streams still open", n)
			}
			if n := openFDs(t); n > fds+fdSlack {
				return fmt.Errorf("%d descriptors open, %d before", n, fds)
			}
			if n := runtime.NumGoroutine(); n > goroutines+goroutineSlack {
				return fmt.Errorf("%d goroutines, %d before", n, goroutines)
			}
			return nil
		})
		restoreGC()
		polltest.Eventually(t, 10*time.Second, "the live heap back to its baseline", func() error {
			if h := liveHeap(); h > heap+heapSlack {
				return fmt.Errorf("live heap %d KiB, %d KiB before", h>>10, heap>>10)
			}
			return nil
		})
		t.Logf("back to the baseline in %s: %d descriptors (%d before), %d goroutines (%d before), live heap %d KiB (%d KiB before)",
			time.Since(settle).Round(time.Millisecond), openFDs(t), fds, runtime.NumGoroutine(), goroutines, liveHeap()>>10, heap>>10)
		after := p.metrics(t)
		if n := after.Value("roomcast_streams_open"); n != 0 {
			t.Fatalf("roomcast_streams_open %v", n)
		}
		opened := after.Sum("roomcast_streams_opened_total") - before.Sum("roomcast_streams_opened_total")
		closed := after.Sum("roomcast_streams_closed_total") - before.Sum("roomcast_streams_closed_total")
		if opened != float64(total) || closed != float64(total) {
			t.Fatalf("%v streams counted opened and %v closed, want %d", opened, closed, total)
		}
		moved(t, before, after, float64(total), "roomcast_streams_closed_total", "reason", "client_gone")
	})
}

// TestLoopIdleStreamsHoldNoGoroutine: on the loop, 500 idle streams hold no
// goroutine each (the workers serve them all); off it, each holds at least one.
func TestLoopIdleStreamsHoldNoGoroutine(t *testing.T) {
	onBothPaths(t, func(t *testing.T, path gateway.IdleLoop) {
		const n = 500
		p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: path}})
		addr := p.public.Listener.Addr().String()
		base := runtime.NumGoroutine()
		for i := range n {
			c, err := openAnchored(addr, fmt.Sprintf("/rooms/idle-%d/events", i%10))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}
		if got := p.rooms.Len(); got != n {
			t.Fatalf("%d streams open, want %d", got, n)
		}
		switch path {
		case gateway.IdleLoopOn:
			// A stream's request goroutine ends once the loop has it.
			polltest.Eventually(t, 10*time.Second, "the streams' goroutines gone", func() error {
				if grew := runtime.NumGoroutine() - base; grew >= 50 {
					return fmt.Errorf("%d idle streams hold %d more goroutines", n, grew)
				}
				return nil
			})
		case gateway.IdleLoopOff:
			if grew := runtime.NumGoroutine() - base; grew < n {
				t.Fatalf("%d idle streams hold %d more goroutines, want at least one each", n, grew)
			}
		}
		t.Logf("%d idle streams: %d more goroutines", n, runtime.NumGoroutine()-base)
	})
}

// TestLoopMultiplexedStreamResumes: a multiplexed stream served live delivers both
// rooms' events in each room's order; after a reconnect its last token resumes
// both rooms with no hole and no duplicate, first from history, then live again.
func TestLoopMultiplexedStreamResumes(t *testing.T) {
	onBothPaths(t, func(t *testing.T, path gateway.IdleLoop) {
		rooms := []string{"loop-a", "loop-b"}
		p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: path}})
		want := map[string][]string{}
		publish := func(n int) {
			for i := range n {
				room := rooms[i%len(rooms)]
				want[room] = append(want[room], p.publish(t, room, fmt.Sprintf(`{"i":%d}`, i)))
			}
		}
		got := map[string][]string{}
		read := func(s *stream, n int) muxEvent {
			var ev muxEvent
			for range n {
				ev = s.nextMux()
				got[ev.room] = append(got[ev.room], ev.pos.String())
			}
			return ev
		}

		s := p.subscribeMany(t, rooms, "")
		s.anchor()
		p.awaitOnLoop(t, path, "")
		publish(20)
		last := read(s, 12)
		s.close()
		publish(10)

		r := p.subscribeMany(t, rooms, "", "Last-Event-ID", last.token)
		r.anchor()
		read(r, 30-12)
		p.awaitOnLoop(t, path, "")
		publish(10)
		read(r, 10)
		for _, room := range rooms {
			if strings.Join(got[room], " ") != strings.Join(want[room], " ") {
				t.Fatalf("room %s: %v, want %v", room, got[room], want[room])
			}
		}
	})
}

// TestLoopGivesBackABurstsMemory: once a burst of 1,000 new streams has settled on
// the loop (2 s without a new one), the pod collects the garbage the burst left
// and gives the memory back: a forced collection, which nothing else in the test
// asks for while it waits.
func TestLoopGivesBackABurstsMemory(t *testing.T) {
	if !gateway.IdleLoopSupported {
		t.Skip("the idle loop needs Linux")
	}
	const n = 1000
	p := newPod(t, podConfig{gw: gateway.Config{IdleLoop: gateway.IdleLoopOn}})
	addr := p.public.Listener.Addr().String()
	forced := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	for i := range n {
		c, err := openAnchored(addr, fmt.Sprintf("/rooms/burst-%d/events", i%10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	polltest.Eventually(t, 10*time.Second, "every stream on the loop", func() error {
		if v := p.metrics(t).Value("roomcast_idle_loop_connections"); v != n {
			return fmt.Errorf("%v connections on the loop, want %d", v, n)
		}
		return nil
	})
	before := forced()
	polltest.Eventually(t, 10*time.Second, "the burst's memory given back", func() error {
		if forced() == before {
			return errors.New("no collection since the burst")
		}
		return nil
	})
}
