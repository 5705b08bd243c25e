package rooms

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/roomcast/roomcast/replay"
)

// BenchmarkFanout measures one event appended to a MemoryLog and delivered to every
// member of its room; each op also drains every member's queue, as streams would.
func BenchmarkFanout(b *testing.B) {
	for _, members := range []int{1, 1000, 10000} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			l := newMemoryLog(b, replay.MemoryConfig{History: 1000})
			g := newRegistry(b, l, l, Config{Queue: 4}) // shorter than firstQueue: the queue never grows, so m.Queue() stays the one to read
			ms := make([]*Member, members)
			for i := range ms {
				ms[i] = join(b, g, "bench")
			}
			ctx := context.Background()
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
			if st := g.Stats(); st.SlowDrops != 0 || st.Repairs != 0 {
				b.Fatalf("Stats = %+v, want every event on the fast path", st)
			}
		})
	}
}
