package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestSlowConsumerIsClosedAndMemoryStaysBounded publishes 8,000 events of 8 KB to a
// room with one client that never reads and one that does. The reader must get every
// event in order (resuming by id if it is ever dropped), the stalled client must be
// closed, and the heap must stay far below what keeping every event for the stalled
// client would take (8,000 × 8 KB = 64 MB of bodies, twice that with frames).
func TestSlowConsumerIsClosedAndMemoryStaysBounded(t *testing.T) {
	const total, size = 8000, 8 << 10
	const heapCeiling = 48 << 20
	p := newPod(t, podConfig{history: 100, gw: gateway.Config{WriteTimeout: 500 * time.Millisecond}})

	stalled, err := net.Dial("tcp", p.public.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	// A tiny receive buffer so that the kernel cannot absorb the whole room.
	_ = stalled.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(stalled, "GET /rooms/big/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	replaytest.Eventually(t, 10*time.Second, "stalled client joined", func() bool { return p.rooms.Len() == 1 })

	var got []uint64
	var reconnects int
	readerDone := make(chan struct{})
	reader := p.subscribe(t, "big", "")
	replaytest.Eventually(t, 10*time.Second, "reader joined", func() bool { return p.rooms.Len() == 2 })
	go func() {
		defer close(readerDone)
		s, last := reader, ""
		for len(got) < total {
			f, ok := s.nextAny()
			if !ok { // dropped: resume by id, as every client does
				reconnects++
				s = p.subscribe(t, "big", "", "Last-Event-ID", last)
				continue
			}
			if f.event == gatewaytest.AnchorType {
				last = f.id
				continue
			}
			if f.data == "" {
				continue
			}
			got = append(got, f.seq(t))
			last = f.id
		}
	}()

	body := `"` + strings.Repeat("x", size-2) + `"`
	// The heap this test adds: what earlier tests of the package left in the process
	// (garbage not yet swept, caches, the OpenAPI checker's model) is not this pod's.
	// The collector runs after every 10% of growth while it measures, so that the
	// garbage of 64 MB of request bodies is not mistaken for what the pod keeps: with
	// the default 100%, a process whose earlier tests left a large live heap lets its
	// garbage grow as large before collecting it.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < total/4; i++ {
				res := do(t, http.MethodPost, p.public.URL+"/rooms/big/events", body, "Content-Type", "application/json")
				if res.status != http.StatusCreated {
					t.Errorf("publish: %d %s", res.status, res.body)
					return
				}
			}
		})
	}
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		for {
			select {
			case <-readerDone:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	}()
	wg.Wait()
	select {
	case <-readerDone:
	case <-time.After(60 * time.Second):
		t.Fatalf("reader got %d of %d events", len(got), total)
	}
	<-sampler

	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("reader: event %d has seq %d", i, s)
		}
	}
	replaytest.Eventually(t, 10*time.Second, "stalled client closed", func() bool { return p.rooms.Len() <= 1 })
	st := p.rooms.Stats()
	if st.SlowDrops == 0 {
		if p.metrics(t).Value("roomcast_streams_closed_total", "reason", "write_failed") != 1 {
			t.Fatal("the stalled client was neither dropped as slow nor timed out on write")
		}
	}
	if peak > base+heapCeiling {
		t.Fatalf("heap in use peaked at %d MiB over the %d MiB in use before, ceiling %d MiB", (peak-base)>>20, base>>20, heapCeiling>>20)
	}
	t.Logf("heap peak %d MiB over %d MiB, slow drops %d, reader reconnects %d", (max(peak, base)-base)>>20, base>>20, st.SlowDrops, reconnects)

	// The server closed the stalled connection itself (it does not linger as an idle
	// keep-alive connection). The kernel may still hold unsent bytes for it.
	want := stalled.LocalAddr().String()
	for {
		select {
		case addr := <-p.closedConns:
			if addr == want {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server never closed the stalled connection")
		}
	}
}

// TestWriteDeadlineClosesAStalledClient leaves the queue room enough that only the
// per-write deadline can catch a client that stopped reading.
func TestWriteDeadlineClosesAStalledClient(t *testing.T) {
	p := newPod(t, podConfig{queue: 100000, queueBytes: 1 << 30, gw: gateway.Config{WriteTimeout: 200 * time.Millisecond, MaxBody: 1 << 20}})
	stalled, err := net.Dial("tcp", p.public.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	_ = stalled.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(stalled, "GET /rooms/w/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	replaytest.Eventually(t, 10*time.Second, "stalled client joined", func() bool { return p.rooms.Len() == 1 })

	body := `"` + strings.Repeat("y", 256<<10) + `"`
	want := stalled.LocalAddr().String()
	for i := 0; ; i++ {
		p.publish(t, "w", body)
		select {
		case addr := <-p.closedConns:
			if addr != want {
				continue
			}
			if st := p.rooms.Stats(); st.SlowDrops != 0 {
				t.Fatalf("closed as a slow consumer (%d), want the write deadline", st.SlowDrops)
			}
			if p.metrics(t).Value("roomcast_streams_closed_total", "reason", "write_failed") != 1 {
				t.Fatal("the close was not counted as a write failure")
			}
			return
		default:
		}
		if i == 400 { // 100 MiB: far beyond any socket buffer
			t.Fatal("the stalled client was never closed")
		}
	}
}
