package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// BenchmarkStreamOpen measures stream opens: a GET, the admission and the first
// frames (retry hint and anchor), then the client goes away. "open" runs without
// access control; the others verify a bearer JWT of that algorithm on every open.
// Opens per second are b.N / elapsed: compare them with
//
//	go test -run '^$' -bench StreamOpen -benchtime 3s -count 6 ./gateway/ | benchstat -col /auth -
func BenchmarkStreamOpen(b *testing.B) {
	keys := gatewaytest.NewKeys(b)
	for _, alg := range []string{"open", "RS256", "ES256", "EdDSA", "HS256"} {
		b.Run("auth="+alg, func(b *testing.B) {
			var base string
			var headers []string
			if alg == "open" {
				base = newPod(b, podConfig{gw: gateway.Config{AcceptRate: 0}}).public.URL
			} else {
				p := newMemSecurePod(b, keys, gateway.Config{})
				base = p.public.URL
				headers = []string{"Authorization", "Bearer " + p.token(b, alg, "ana", time.Hour, []string{"bench"}, nil)}
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					openOnce(b, client, base+"/rooms/bench/events", headers)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "opens/s")
		})
	}
}

// openOnce opens a stream, reads up to its anchor and goes away.
func openOnce(b *testing.B, client *http.Client, url string, headers []string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := client.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Errorf("status %d", res.StatusCode)
		return
	}
	dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
	for range 2 { // the retry hint, then the anchor
		if _, err := dec.NextFrame(); err != nil {
			b.Error(err)
			return
		}
	}
}
