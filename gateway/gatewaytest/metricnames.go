package gatewaytest

import (
	"context"
	"maps"
	"net/http"
	"slices"
)

// FleetMetrics are the metric families every pod with --redis exports from its
// start, before anything happened: the names dashboards and alerts may use. (The
// roomcast_redis_subscriber_* gauges need +client|list in the pod's Redis ACL.)
// go_sched_latencies_seconds comes from the Go collector cmd/gateway registers.
var FleetMetrics = []string{
	"roomcast_streams_open",
	"roomcast_streams_opened_total",
	"roomcast_streams_closed_total",
	"roomcast_streams_rejected_total",
	"roomcast_events_published_total",
	"roomcast_publish_errors_total",
	"roomcast_publish_duration_seconds",
	"roomcast_events_delivered_total",
	"roomcast_resyncs_sent_total",
	"roomcast_queued_bytes",
	"roomcast_rooms",
	"roomcast_bus_subscriptions",
	"roomcast_drain_state",
	"roomcast_drain_closed_total",
	"roomcast_rebalance_shed_total",
	"roomcast_rebalance_rounds_total",
	"roomcast_recent_bytes",
	"roomcast_resume_recent_hits_total",
	"roomcast_resume_history_reads_total",
	"roomcast_auth_refused_total",
	"roomcast_tickets_issued_total",
	"roomcast_connections_refused_total",
	"roomcast_admin_unauthorized_total",
	"roomcast_cross_origin_refused_total",
	"roomcast_client_queue_depth",
	"roomcast_client_drops_total",
	"roomcast_gaps_repaired_total",
	"roomcast_room_resyncs_total",
	"roomcast_forks_total",
	"roomcast_queue_policy_drops_total",
	"roomcast_queue_policy_resyncs_total",
	"roomcast_publish_to_deliver_seconds",
	"roomcast_fanout_lag_seconds",
	"roomcast_doorbell_repairs_total",
	"roomcast_redis_up",
	"roomcast_redis_call_duration_seconds",
	"roomcast_redis_call_errors_total",
	"roomcast_redis_resubscribes_total",
	"roomcast_redis_subscriber_connections",
	"roomcast_redis_subscriber_output_buffer_bytes",
	"roomcast_redis_subscriber_memory_bytes",
	"roomcast_build_info",
	"go_sched_latencies_seconds",
}

// RedisMetrics are the families of FleetMetrics only a pod with --redis exports.
var RedisMetrics = []string{
	"roomcast_redis_up",
	"roomcast_redis_call_duration_seconds",
	"roomcast_redis_call_errors_total",
	"roomcast_redis_resubscribes_total",
	"roomcast_redis_subscriber_connections",
	"roomcast_redis_subscriber_output_buffer_bytes",
	"roomcast_redis_subscriber_memory_bytes",
}

// EmbeddedMetrics are the families only a pod on the embedded log exports.
var EmbeddedMetrics = []string{"roomcast_log_rooms", "roomcast_log_bytes", "roomcast_log_evictions_total"}

// RemovedMetrics are names no pod exports any more, with what replaced them:
// roomcast_client_drops_total{reason}, roomcast_gaps_repaired_total and
// roomcast_doorbell_repairs_total, roomcast_redis_up.
var RemovedMetrics = []string{
	"roomcast_slow_consumer_drops_total",
	"roomcast_queue_budget_drops_total",
	"roomcast_room_repairs_total",
	"roomcast_backend_up",
}

// ScrapeFamilies fetches url (a /metrics) with hc and returns the names of the
// metric families it exposes, sorted.
func ScrapeFamilies(ctx context.Context, hc *http.Client, url string) ([]string, error) {
	fams, err := fetchFamilies(ctx, hc, url)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(fams)), nil
}
