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
	}
}
