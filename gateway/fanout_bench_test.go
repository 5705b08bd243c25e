package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
	"github.com/roomcast/roomcast/replay"
)

// BenchmarkFanoutWire measures fan-out end to end, over HTTP: one room, 100
// connections of a transport (single-room SSE streams, WebSocket connections), events
// published straight into the log and read off the wire by every connection. It
// reports ns and wire bytes per delivered event (one event to one connection).
func BenchmarkFanoutWire(b *testing.B) {
	const conns = 100
	msg := replay.Message{Body: json.RawMessage(`{"text":"hello, room","n":12345}`)}
	for _, transport := range []string{"sse", "ws"} {
		b.Run(transport+"-"+strconv.Itoa(conns), func(b *testing.B) {
			p := newPod(b, podConfig{queue: 8192})
			counters := make([]*wireCounter, conns)
			for i := range counters {
				if transport == "sse" {
					counters[i] = openCountingStream(b, p.public.URL+"/rooms/bench/events")
				} else {
					counters[i] = openCountingWS(b, p.public.URL, "bench-"+strconv.Itoa(i))
				}
			}
			delivered := func() (n, bytes int64) {
				for _, c := range counters {
					n += c.events.Load()
					bytes += c.bytes.Load()
				}
				return n, bytes
			}
			base, before := delivered() // the SSE anchors' data lines
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			const chunk = 256 // published at a time, then delivered, so no queue overflows
			for i := 0; i < b.N; {
				end := min(i+chunk, b.N)
				for ; i < end; i++ {
					if _, err := p.mem.Append(ctx, "bench", msg); err != nil {
						b.Fatal(err)
					}
				}
				awaitDelivered(counters, base, int64(end)*conns)
			}
			b.StopTimer()
			n, after := delivered()
			if n-base != int64(b.N)*conns {
				b.Fatalf("%d events delivered, want %d", n-base, b.N*conns)
			}
			total := float64(b.N) * conns
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/delivery")
			b.ReportMetric(float64(after-before)/total, "wire-B/event")
		})
	}
}

// openCountingStream opens an SSE stream at u and counts the bytes and "data: "
// lines it reads until the benchmark ends, once its anchor has come.
func openCountingStream(b *testing.B, u string) *wireCounter {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("open %s: %v", u, err)
	}
	c := &wireCounter{}
	done := make(chan struct{})
	go func() { c.read(res.Body); close(done) }()
	b.Cleanup(func() { cancel(); <-done; res.Body.Close() })
	for c.events.Load() == 0 {
		time.Sleep(50 * time.Microsecond)
	}
	return c
}

// openCountingWS opens a WebSocket connection following room bench as client and
// counts the bytes and event frames it reads until the benchmark ends.
func openCountingWS(b *testing.B, base, client string) *wireCounter {
	ctx, cancel := context.WithCancel(context.Background())
	c, _, err := wsclient.Dial(ctx, wsclient.URL(base), wsclient.Options{})
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	if err := c.Hello(ctx, "anon:"+client, replay.NewBoot(time.Now()), map[string]string{"bench": ""}); err != nil {
		b.Fatalf("hello: %v", err)
	}
	if f, err := c.Read(ctx); err != nil || f.Kind != wsclient.KindWelcome {
		b.Fatalf("welcome: %+v %v", f, err)
	}
	wc := &wireCounter{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, _, err := c.ReadRaw(ctx)
			if err != nil {
				return
			}
			wc.bytes.Add(int64(len(m)))
			if bytes.Contains(m, []byte(`"kind":"event"`)) {
				wc.events.Add(1)
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-done; _ = c.CloseNow() })
	return wc
}

// awaitDelivered waits until the counters have read n events more than base.
func awaitDelivered(counters []*wireCounter, base, n int64) {
	for {
		var got int64
		for _, c := range counters {
			got += c.events.Load()
		}
		if got-base >= n {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}
