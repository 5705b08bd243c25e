package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/rooms"
)

// registerRecentMetrics registers what resumes cost: how many the rooms' latest
// events served, how many reads of the log the others took, and the memory those
// events hold.
func registerRecentMetrics(reg prometheus.Registerer, s *Server) error {
	stat := func(f func(rooms.Stats) float64) func() float64 {
		return func() float64 { return f(s.rooms.Stats()) }
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_resume_recent_hits_total",
			Help: "Resume reads served from the rooms' latest events, without reading the log."},
			stat(func(st rooms.Stats) float64 { return float64(st.RecentHits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_resume_history_reads_total",
			Help: "Reads of the log made for resumes: one per room to fill its latest events, and reads shared by the resumes they do not hold."},
			stat(func(st rooms.Stats) float64 { return float64(st.HistoryReads) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_recent_bytes",
			Help: "Bytes the rooms' latest events take, bounded by --recent-bytes."},
			stat(func(st rooms.Stats) float64 { return float64(st.RecentBytes) })),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
