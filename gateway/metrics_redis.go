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
	Clients() replay.RedisClients
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
		calls, errs, newClientsCollector(rl),
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

// clientsCollector exports the log's last sample of the pod's own subscriber
// connections (replay.RedisClients): nothing while there is none, as when Redis
// refuses CLIENT LIST to the pod's user. It reads the sample; it never asks Redis.
type clientsCollector struct {
	rl               redisLog
	conns, omem, mem *prometheus.Desc
}

func newClientsCollector(rl redisLog) *clientsCollector {
	return &clientsCollector{
		rl: rl,
		conns: prometheus.NewDesc("roomcast_redis_subscriber_connections",
			"This pod's sharded-subscriber connections as Redis lists them (CLIENT LIST TYPE pubsub, by the pod's connection name, sampled every --redis-sample-interval): "+
				"up, connections with a subscription, over every node (one per cluster node that serves a subscribed room; up to 4 on a standalone server); "+
				"down, nodes that should hold one (they serve a subscribed room) and list none or did not answer.",
			[]string{"state"}, nil),
		omem: prometheus.NewDesc("roomcast_redis_subscriber_output_buffer_bytes",
			"The largest output buffer (omem) among this pod's subscriber connections at the last sample: what Redis holds for the pod, unsent. Redis closes a connection past the pubsub client-output-buffer-limit, which is per connection.",
			nil, nil),
		mem: prometheus.NewDesc("roomcast_redis_subscriber_memory_bytes",
			"Total memory (tot-mem: buffers and the connection's own structures) of this pod's subscriber connections at the last sample, summed over every node.",
			nil, nil),
	}
}

func (c *clientsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conns
	ch <- c.omem
	ch <- c.mem
}

func (c *clientsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.rl.Clients()
	if !s.Sampled {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Up), "up")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Down), "down")
	ch <- prometheus.MustNewConstMetric(c.omem, prometheus.GaugeValue, float64(s.MaxOutputBuffer))
	ch <- prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, float64(s.Memory))
}
