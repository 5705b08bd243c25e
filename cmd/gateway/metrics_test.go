package main

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestFleetPodExportsAgreedMetrics lists the metric families on /metrics of a pod
// started with --redis, with nothing provoked, and fails on any agreed name missing
// or any removed name present.
func TestFleetPodExportsAgreedMetrics(t *testing.T) {
	srv := redistest.Standalone(t)
	p := startGateway(t, "--redis", srv.Addr)
	have, err := gatewaytest.ScrapeFamilies(context.Background(), http.DefaultClient, p.Admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range gatewaytest.FleetMetrics {
		if !slices.Contains(have, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for _, name := range gatewaytest.RemovedMetrics {
		if slices.Contains(have, name) {
			t.Errorf("/metrics still has %s", name)
		}
	}
	if t.Failed() {
		t.Logf("families: %v", have)
	}
}
