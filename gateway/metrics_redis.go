package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/replay"
)

// redisLog is what the gateway measures of a fleet's Redis log: its calls, its
// counters and its health.
type redisLog interface {
	ObserveCalls(replay.CallObserver)
	Stats() replay.RedisStats
	Health() replay.Health
}

// Redis call latency: 100µs to about 6.5s.
var redisCallBuckets = prometheus.ExponentialBuckets(0.0001, 4, 9)

// redisCollectors are the metrics of the fleet's Redis as this pod sees it; none
// for a log that is not Redis. It wires the log's call observer to them.
func redisCollectors(log replay.Log) []prometheus.Collector {
	rl, ok := log.(redisLog)
	if !ok {
		return nil
	}
	calls := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "roomcast_redis_call_duration_seconds",
		Help:    "Redis calls by operation (publish, batch, since, subscribe, health, ticket, revoke, occupancy, owner): each round trip, a pipelined flush counted once.",
		Buckets: redisCallBuckets}, []string{"op"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roomcast_redis_call_errors_total",
		Help: "Redis calls that failed, by operation (retried attempts each count; subscribe also counts subscriptions lost)."},
		[]string{"op"})
	var (
		took   [replay.NumRedisOps]prometheus.Observer
		failed [replay.NumRedisOps]prometheus.Counter
	)
	for _, op := range replay.RedisOps {
		took[op] = calls.WithLabelValues(op.String())
		failed[op] = errs.WithLabelValues(op.String())
	}
	rl.ObserveCalls(func(op replay.RedisOp, d time.Duration, err error) {
		if op <= 0 || op >= replay.NumRedisOps {
			return
		}
		if d >= 0 {
			took[op].Observe(d.Seconds())
		}
		if err != nil {
			failed[op].Inc()
		}
	})
	return []prometheus.Collector{
		calls, errs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_redis_up",
			Help: "1 when Redis answered the last health check (a PING to every node, every second; up when any answers), else 0. Readiness does not follow it."},
			func() float64 {
				if rl.Health().Up {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_redis_resubscribes_total",
			Help: "Room subscriptions confirmed again after a failover, slot move or lost connection (each repairs its room from the log)."},
			func() float64 { return float64(rl.Stats().Resubscribes) }),
	}
}
