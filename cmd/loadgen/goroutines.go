package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// goroutinesMetric is the Go runtime's goroutine count in a Prometheus exposition
// (client_golang's Go collector): roomcast's admin /metrics, Centrifugo's /metrics
// with its Prometheus endpoint on, and the yardstick hub's /metrics have it.
const goroutinesMetric = "go_goroutines"

// scrapeTimeout bounds one read of -metrics-url.
const scrapeTimeout = 10 * time.Second

// readGoroutines reads go_goroutines from url, a Prometheus text exposition.
func readGoroutines(ctx context.Context, hc *http.Client, url string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	m, err := gatewaytest.Scrape(ctx, hc, url)
	if err != nil {
		return 0, fmt.Errorf("goroutines: %w", err)
	}
	v, ok := m[goroutinesMetric]
	if !ok {
		return 0, fmt.Errorf("goroutines: %s has no %s", url, goroutinesMetric)
	}
	return int64(v), nil
}
