package gateway

import (
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/roomcast/roomcast/rooms"
)

// publishErrorCodes are the publish error codes the server itself causes, present
// from the start so that a rate over them has a series before the first error.
var publishErrorCodes = []string{"unavailable", "outcome_unknown"}

// Drop reasons of roomcast_client_drops_total: a client dropped because its queue
// overflowed, because the pod's bytes queued to all clients went over its budget,
// or because a write to it failed or missed its deadline. Each drop counts once,
// under the reason that closed it first.
const (
	dropSlowConsumer = "slow_consumer"
	dropQueueBudget  = "queue_budget"
	dropWriteFailed  = "write_failed"
)

// Histogram buckets.
var (
	// Events waiting in one queue: 0 and powers of two to 1024 (--queue is 256
	// by default).
	queueDepthBuckets = append([]float64{0}, prometheus.ExponentialBuckets(1, 2, 11)...)
	// Doorbell to queued: 10µs to about 2.6s.
	fanoutLagBuckets = prometheus.ExponentialBuckets(0.00001, 4, 10)
	// Publish to written: 1ms (the envelope's ts has millisecond precision) to
	// about 16s.
	deliverBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)
)

// newCollectors makes the collectors of the client queues, the rooms' repairs,
// delivery latency, the drain and the build, and wires the registry's observer to
// them.
func (m *metrics) newCollectors(s *Server) []prometheus.Collector {
	m.queueDepth = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "roomcast_client_queue_depth",
		Help:    "Events waiting in one client's queue, sampled every second over up to 1024 open clients.",
		Buckets: queueDepthBuckets})
	m.fanoutLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "roomcast_fanout_lag_seconds",
		Help:    "Time from a room's doorbell (or the ring that started a repair) until its event was queued to every local member: one event in 8 of each room, and every event a repair delivers.",
		Buckets: fanoutLagBuckets})
	m.publishToDeliver = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "roomcast_publish_to_deliver_seconds",
		Help:    "Time from an event's publish (the envelope's ts, the publishing pod's or Redis's clock) until its frame was written to a live stream, per frame.",
		Buckets: deliverBuckets})
	s.rooms.Observe(rooms.Observer{
		QueueDepth: func(n int) { m.queueDepth.Observe(float64(n)) },
		FanoutLag:  func(d time.Duration) { m.fanoutLag.Observe(d.Seconds()) },
	})
	stat := func(f func(rooms.Stats) uint64) func() float64 {
		return func() float64 { return float64(f(s.rooms.Stats())) }
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "roomcast_build_info",
		Help: "Always 1: the build's version (module version, else VCS revision, else devel) and Go version."},
		[]string{"version", "goversion"})
	build.WithLabelValues(buildVersion(), runtime.Version()).Set(1)
	return []prometheus.Collector{
		m.queueDepth, m.fanoutLag, m.publishToDeliver, build,
		&dropsCollector{s: s},
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_gaps_repaired_total",
			Help: "Room gaps filled from the log: repairs that delivered the events the doorbell missed, without a resync."},
			stat(func(st rooms.Stats) uint64 { return st.GapsRepaired })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_doorbell_repairs_total",
			Help: "Doorbells that could not be delivered as they came (a gap, a new epoch, a ring saying events may have been missed) and started a repair from the log."},
			stat(func(st rooms.Stats) uint64 { return st.Repairs })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_forks_total",
			Help: "Rooms whose history changed under their members: a new epoch, or another event at a seq members were given."},
			stat(func(st rooms.Stats) uint64 { return st.Forks })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_drain_closed_total",
			Help: "Streams closed by the drain schedule."},
			func() float64 { return float64(s.drain.Closed()) }),
	}
}

// dropsCollector is roomcast_client_drops_total, read from the counters the
// registry and the streams keep; /admin/stats reads the same ones.
type dropsCollector struct{ s *Server }

var dropsDesc = prometheus.NewDesc("roomcast_client_drops_total",
	"Clients dropped, by reason: slow_consumer (queue full), queue_budget (the pod's queued bytes over --max-queued-bytes), write_failed (a write failed or missed its deadline).",
	[]string{"reason"}, nil)

func (c *dropsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- dropsDesc }

func (c *dropsCollector) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range c.s.drops() {
		ch <- prometheus.MustNewConstMetric(dropsDesc, prometheus.CounterValue, float64(n), reason)
	}
}

// drops counts the clients dropped, by reason.
func (s *Server) drops() map[string]uint64 {
	st := s.rooms.Stats()
	return map[string]uint64{
		dropSlowConsumer: st.QueueDrops,
		dropQueueBudget:  st.BudgetDrops,
		dropWriteFailed:  s.writeDrops.Load(),
	}
}

// value reads a counter's or a gauge's current value.
func value(c prometheus.Metric) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return 0
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// counterRate is a counter's mean rate per second over the last rateWindow
// seconds, from snapshots of its value taken once per second by whoever asks or
// counts first: the rate of /admin/stats reads the counter Prometheus scrapes.
type counterRate struct {
	read  func() float64 // the counter's value
	mu    sync.Mutex
	snaps [rateWindow + 1]struct {
		sec int64
		at  time.Time
		v   float64
	}
}

const rateWindow = 10 // seconds

// touch snapshots the counter once per second; call it before counting.
func (r *counterRate) touch(now time.Time) {
	sec := now.Unix()
	i := sec % int64(len(r.snaps))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snaps[i].sec != sec || r.snaps[i].at.IsZero() {
		r.snaps[i].sec, r.snaps[i].at, r.snaps[i].v = sec, now, r.read()
	}
}

// rate is the counter's increase since its oldest snapshot within the window,
// per second of the window.
func (r *counterRate) rate(now time.Time) float64 {
	r.touch(now)
	sec := now.Unix()
	cur := r.read()
	r.mu.Lock()
	defer r.mu.Unlock()
	oldest := -1
	for i := range r.snaps {
		if d := sec - r.snaps[i].sec; !r.snaps[i].at.IsZero() && d >= 0 && d <= rateWindow {
			if oldest < 0 || r.snaps[i].sec < r.snaps[oldest].sec {
				oldest = i
			}
		}
	}
	if oldest < 0 {
		return 0
	}
	return (cur - r.snaps[oldest].v) / rateWindow
}

// countOpened counts a stream admitted, resumed or not.
func (s *Server) countOpened(resumed bool) {
	now := time.Now()
	s.connects.touch(now)
	if resumed {
		s.resumes.touch(now)
		s.m.resumed.Inc()
		return
	}
	s.m.opened.Inc()
}
