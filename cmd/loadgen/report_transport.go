package main

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Transport names, the keys of Report.Transports.
const (
	transportSSE = "sse"
	transportWS  = "ws"
)

// TransportResult is the figures of one transport's subscribers, in the units of
// the report's top-level fields of the same names.
type TransportResult struct {
	Subscribers        int     `json:"subscribers"`
	Deliveries         uint64  `json:"deliveries"`
	ExpectedDeliveries uint64  `json:"expected_deliveries"`
	DeliveriesPerSec   float64 `json:"deliveries_per_sec"`
	P50ms              float64 `json:"p50_ms"`
	P99ms              float64 `json:"p99_ms"`
	MaxMs              float64 `json:"max_ms"`
	Gaps               uint64  `json:"gaps"`
	Lost               uint64  `json:"lost"`
	Reconnects         int64   `json:"reconnects"`
	// RefusedAcks counts the acks the server answered with an error frame (ws only).
	RefusedAcks uint64 `json:"refused_acks,omitempty"`
}

// transportOf names s's transport.
func transportOf(s *subscriber) string {
	if s.ws != nil {
		return transportWS
	}
	return transportSSE
}

// fillTransports splits the figures by transport; every goroutine has returned.
func (r *Report) fillTransports(subs []*subscriber, rooms []*room, w window) {
	r.Transports = map[string]*TransportResult{transportSSE: {}, transportWS: {}}
	lat := map[string]*latencies{transportSSE: {}, transportWS: {}}
	for _, s := range subs {
		name := transportOf(s)
		t := r.Transports[name]
		t.Subscribers++
		t.Deliveries += s.deliveries.Load()
		t.Gaps += s.track.Gaps()
		t.Lost += s.track.Gaps() + s.undelivered()
		t.Reconnects += s.reconnects
		if s.ws != nil {
			t.RefusedAcks += s.ws.refusedAcks
		}
		if s.hist != nil {
			lat[name].add(s.hist)
		}
	}
	for _, rm := range rooms {
		n := uint64(rm.published.Load())
		r.Transports[transportWS].ExpectedDeliveries += n * uint64(rm.wsMembers)
		r.Transports[transportSSE].ExpectedDeliveries += n * uint64(rm.members-rm.wsMembers)
	}
	if secs := w.end.Sub(w.start).Seconds(); secs > 0 {
		ws := w.wsDeliveries1 - w.wsDeliveries0
		r.Transports[transportWS].DeliveriesPerSec = float64(ws) / secs
		r.Transports[transportSSE].DeliveriesPerSec = float64(w.deliveries1-w.deliveries0-ws) / secs
	}
	for name, t := range r.Transports {
		l := lat[name]
		t.P50ms = millis(l.quantile(0.50))
		t.P99ms = millis(l.quantile(0.99))
		t.MaxMs = millis(time.Duration(l.max) * time.Microsecond)
	}
}

// writeTransports prints one row per transport.
func (r *Report) writeTransports(row func(k, format string, v ...any)) {
	for _, name := range slices.Sorted(maps.Keys(r.Transports)) {
		t := r.Transports[name]
		if r.Idle {
			row("transport "+name, "%d subscribers", t.Subscribers)
			continue
		}
		refused := ""
		if t.RefusedAcks > 0 {
			refused = fmt.Sprintf(", refused acks %d", t.RefusedAcks)
		}
		row("transport "+name, "%d subscribers: deliveries %d (expected %d), %.0f deliveries/s, p50 %.2fms  p99 %.2fms  max %.2fms, gaps %d, lost %d, reconnects %d%s",
			t.Subscribers, t.Deliveries, t.ExpectedDeliveries, t.DeliveriesPerSec, t.P50ms, t.P99ms, t.MaxMs, t.Gaps, t.Lost, t.Reconnects, refused)
	}
}

// sumDeliveriesBy sums the SSE and the WebSocket subscribers' deliveries, in one
// pass.
func sumDeliveriesBy(subs []*subscriber) (sse, ws uint64) {
	for _, s := range subs {
		if s.ws != nil {
			ws += s.deliveries.Load()
		} else {
			sse += s.deliveries.Load()
		}
	}
	return sse, ws
}
