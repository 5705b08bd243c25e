package gateway

import "github.com/prometheus/client_golang/prometheus"

// logStatser is the optional capability of a log that knows what it holds in this
// process: the embedded memory log.
type logStatser interface {
	Stats() (rooms int, bytes int64)
}

// logCollectors are the gauges of the log's own holdings, when it reports them.
func logCollectors(log any) []prometheus.Collector {
	ls, ok := log.(logStatser)
	if !ok {
		return nil
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_log_rooms", Help: "Rooms holding history in the embedded log."},
			func() float64 { n, _ := ls.Stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_log_bytes", Help: "Bytes the embedded log charges against --max-history-bytes: events, idempotency keys and room records."},
			func() float64 { _, b := ls.Stats(); return float64(b) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_log_evictions_total", Help: "Events the embedded log shed before their time, oldest of their room first, to stay within --max-history-bytes."},
			func() float64 {
				if e, ok := ls.(logEvicter); ok {
					return float64(e.Evictions())
				}
				return 0
			}),
	}
}

// logEvicter is the optional capability of a log that sheds events to stay within
// its bounds: the embedded memory log.
type logEvicter interface {
	Evictions() uint64
}
