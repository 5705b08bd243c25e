package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/rooms"
)

// policyCollectors makes the queue policies' counters: the events their queues
// dropped (counted by the registry) and the resyncs that announced them (counted
// here, as they are written), by policy, every policy that drops events present
// from the start.
func (m *metrics) policyCollectors(s *Server) []prometheus.Collector {
	resyncs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roomcast_queue_policy_resyncs_total",
		Help: "resync frames that announced events a full queue dropped by its room's queue policy (--room-policy), by policy."},
		[]string{"policy"})
	// A room under close drops nothing; its counter is not exported.
	m.policyResyncs[rooms.PolicyClose] = prometheus.NewCounter(prometheus.CounterOpts{Name: "roomcast_queue_policy_resyncs_close"})
	cs := []prometheus.Collector{resyncs}
	for _, p := range rooms.Policies {
		m.policyResyncs[p] = resyncs.WithLabelValues(p.String())
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_queue_policy_drops_total",
			Help:        "Events a full queue dropped by its room's queue policy (--room-policy) instead of closing the client, by policy.",
			ConstLabels: prometheus.Labels{"policy": p.String()}},
			func() float64 { return float64(s.rooms.Stats().PolicyDrops[p]) }))
	}
	return cs
}
