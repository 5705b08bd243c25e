package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// BenchmarkFanoutMetrics is rooms' BenchmarkFanout on a registry a Server was
// built over, so with the gateway's metrics wired as a pod runs them: one event
// appended to a MemoryLog and delivered to every member of its room, each op also
// draining every member's queue.
func BenchmarkFanoutMetrics(b *testing.B) {
	discard := slog.New(slog.DiscardHandler)
	for _, members := range []int{1, 1000, 10000} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			l, err := replay.NewMemoryLog(replay.MemoryConfig{History: 1000})
			if err != nil {
				b.Fatal(err)
			}
			g, err := rooms.New(l, l, rooms.Config{Queue: 4, Logger: discard})
			if err != nil {
				b.Fatal(err)
			}
			dr, err := drain.New(g, drain.Config{Timeout: time.Second, Logger: discard})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := gateway.New(l, g, dr, gateway.Config{Logger: discard}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = g.Close(ctx)
				_ = l.Close(ctx)
			})
			ctx := context.Background()
			ms := make([]*rooms.Member, members)
			for i := range ms {
				if ms[i], err = g.Join(ctx, "bench"); err != nil {
					b.Fatal(err)
				}
			}
			msg := replay.Message{Body: json.RawMessage(`{"n":1}`)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(ctx, "bench", msg); err != nil {
					b.Fatal(err)
				}
				for _, m := range ms {
					select {
					case it := <-m.Queue():
						m.Release(it)
					default:
						b.Fatalf("member not delivered (reason %s)", m.Reason())
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(members), "ns/delivery")
		})
	}
}
