package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// Publish benchmarks: real HTTP to a real pod, embedded and on a standalone
// redis-server, one publish per request over 1,000 rooms, and batches of 100.
// Compare base and new with benchstat on short interleaved runs; never assert speed.

func benchPods(b *testing.B) map[string]func(b *testing.B) *pod {
	return map[string]func(b *testing.B) *pod{
		"embedded": func(b *testing.B) *pod { return newPod(b, podConfig{history: 1000}) },
		"redis": func(b *testing.B) *pod {
			s := redistest.SharedStandalone(b)
			return newFleetPod(b, s, replay.RedisConfig{}, podConfig{})
		},
	}
}

func BenchmarkPublishHTTP(b *testing.B) {
	for _, mode := range []string{"embedded", "redis"} {
		b.Run(mode, func(b *testing.B) {
			p := benchPods(b)[mode](b)
			prefix := redistest.Prefix(b)
			client := benchClient()
			var n atomic.Uint64
			body := []byte(`{"user":"ada","text":"hello, world","n":42}`)
			b.ReportAllocs()
			b.SetParallelism(8) // many connections, like wrk -c50 on two cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					url := p.public.URL + "/rooms/" + prefix + strconv.FormatUint(i%1000, 10) + "/events"
					res, err := client.Post(url, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusCreated {
						b.Errorf("publish: %d", res.StatusCode)
						return
					}
				}
			})
		})
	}
}

func BenchmarkPublishBatchHTTP(b *testing.B) {
	for _, mode := range []string{"embedded", "redis"} {
		b.Run(mode, func(b *testing.B) {
			p := benchPods(b)[mode](b)
			prefix := redistest.Prefix(b)
			client := benchClient()
			var n atomic.Uint64
			const items = 100
			b.ReportAllocs()
			b.SetParallelism(2)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var sb strings.Builder
				for pb.Next() {
					base := n.Add(items)
					sb.Reset()
					sb.WriteByte('[')
					for j := uint64(0); j < items; j++ {
						if j > 0 {
							sb.WriteByte(',')
						}
						sb.WriteString(`{"room":"` + prefix + strconv.FormatUint((base+j)%1000, 10) + `","body":{"user":"ada","text":"hello, world","n":42}}`)
					}
					sb.WriteByte(']')
					res, err := client.Post(p.public.URL+"/events", "application/json", strings.NewReader(sb.String()))
					if err != nil {
						b.Error(err)
						return
					}
					out, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK || bytes.Count(out, []byte(`"status":201`)) != items {
						b.Errorf("batch: %d %.200s", res.StatusCode, out)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*items)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func benchClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}
