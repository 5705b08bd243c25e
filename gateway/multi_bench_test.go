package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/roomcast/roomcast/replay"
)

// wireCounter reads a stream to its end, counting the bytes and the events
// ("data: " lines) that arrive.
type wireCounter struct {
	bytes, events atomic.Int64
}

func (c *wireCounter) read(r io.Reader) {
	marker := []byte("\ndata: ")
	buf := make([]byte, 64<<10)
	// A marker split across two reads is counted in the joint: the end of one read
	// and the start of the next, each shorter than a marker.
	joint := make([]byte, 0, 2*len(marker))
	tail := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.bytes.Add(int64(n))
			joint = append(joint[:tail], buf[:min(n, len(marker)-1)]...)
			k := bytes.Count(joint, marker) + bytes.Count(buf[:n], marker)
			c.events.Add(int64(k))
			tail = min(n, len(marker)-1)
			joint = append(joint[:0], buf[n-tail:n]...)
		}
		if err != nil {
			return
		}
	}
}

// BenchmarkMultiplexed compares one multiplexed stream of 32 rooms with 32
// single-room streams, over the same events (published round-robin to the rooms,
// straight into the log): ns and wire bytes per delivered event.
func BenchmarkMultiplexed(b *testing.B) {
	const nRooms = 32
	rooms := make([]string, nRooms)
	for i := range rooms {
		rooms[i] = "bench-room-" + strconv.Itoa(i)
	}
	msg := replay.Message{Body: json.RawMessage(`{"text":"hello, room","n":12345}`)}
	for _, mode := range []string{"mux", "single"} {
		b.Run(mode+"-32", func(b *testing.B) {
			p := newPod(b, podConfig{queue: 8192})
			var counters []*wireCounter
			if mode == "mux" {
				counters = append(counters, openCountingStream(b, muxURL(p.public.URL, rooms, "")))
			} else {
				for _, room := range rooms {
					counters = append(counters, openCountingStream(b, p.public.URL+"/rooms/"+room+"/events"))
				}
			}
			delivered := func() (n, bytes int64) {
				for _, c := range counters {
					n += c.events.Load()
					bytes += c.bytes.Load()
				}
				return n, bytes
			}
			base, before := delivered() // the anchors' data lines
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			const chunk = 2048 // published at a time, then delivered, so no queue overflows
			for i := 0; i < b.N; {
				end := min(i+chunk, b.N)
				for ; i < end; i++ {
					if _, err := p.mem.Append(ctx, rooms[i%nRooms], msg); err != nil {
						b.Fatal(err)
					}
				}
				awaitDelivered(counters, base, int64(end))
			}
			b.StopTimer()
			n, after := delivered()
			if n-base != int64(b.N) {
				b.Fatalf("%d events delivered, want %d", n-base, b.N)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/event")
			b.ReportMetric(float64(after-before)/float64(b.N), "wire-B/event")
		})
	}
}
