package gateway

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/rooms"
)

type metrics struct {
	streamsOpened  *prometheus.CounterVec
	streamsClosed  *prometheus.CounterVec
	streamsTurned  *prometheus.CounterVec
	delivered      prometheus.Counter
	resyncsSent    prometheus.Counter
	published      prometheus.Counter
	publishErrors  *prometheus.CounterVec
	publishSeconds prometheus.Histogram
	authRefused    *prometheus.CounterVec
	ticketsIssued  prometheus.Counter
}

func newMetrics(reg *prometheus.Registry, s *Server) (*metrics, error) {
	m := &metrics{
		streamsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcast_streams_opened_total", Help: "SSE streams admitted, by whether they resumed from an id.",
		}, []string{"resumed"}),
		streamsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcast_streams_closed_total", Help: "SSE streams ended, by reason.",
		}, []string{"reason"}),
		streamsTurned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcast_streams_rejected_total", Help: "Streams answered with a longer retry hint and an ended stream instead of being admitted, by reason.",
		}, []string{"reason"}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_events_delivered_total", Help: "Event frames written to streams, history included.",
		}),
		resyncsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_resyncs_sent_total", Help: "resync frames written to streams.",
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_events_published_total", Help: "Events accepted by the log.",
		}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcast_publish_errors_total", Help: "Publishes refused, by error code.",
		}, []string{"error"}),
		publishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "roomcast_publish_duration_seconds", Help: "Time to append one event to the log.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10),
		}),
		authRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcast_auth_refused_total", Help: "Requests refused by access control, by route kind (subscribe, publish) and why (credential: none or invalid; revoked; grant: the room is not granted).",
		}, []string{"route", "reason"}),
		ticketsIssued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcast_tickets_issued_total", Help: "Single-use stream tickets issued by POST /tickets.",
		}),
	}
	for _, r := range rooms.Reasons {
		m.streamsClosed.WithLabelValues(r.String())
	}
	for _, route := range []string{"subscribe", "publish"} {
		for _, why := range []string{"credential", "revoked", "grant"} {
			m.authRefused.WithLabelValues(route, why)
		}
	}
	for _, r := range []string{rejectDraining, rejectRate, rejectCapacity, rejectClientIP, rejectAnonymousRooms} {
		m.streamsTurned.WithLabelValues(r)
	}
	m.streamsOpened.WithLabelValues("true")
	m.streamsOpened.WithLabelValues("false")
	stat := func(f func(rooms.Stats) float64) func() float64 {
		return func() float64 { return f(s.rooms.Stats()) }
	}
	cs := []prometheus.Collector{
		m.streamsOpened, m.streamsClosed, m.streamsTurned, m.delivered, m.resyncsSent,
		m.published, m.publishErrors, m.publishSeconds, m.authRefused, m.ticketsIssued,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_streams_open", Help: "Open SSE streams."},
			stat(func(st rooms.Stats) float64 { return float64(st.Members) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_rooms", Help: "Rooms with local members (or lingering)."},
			stat(func(st rooms.Stats) float64 { return float64(st.Rooms) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_bus_subscriptions", Help: "Doorbell subscriptions held by this pod."},
			stat(func(st rooms.Stats) float64 { return float64(st.Subscriptions) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_slow_consumer_drops_total", Help: "Streams closed because their queue overflowed."},
			stat(func(st rooms.Stats) float64 { return float64(st.SlowDrops) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_queue_budget_drops_total", Help: "Streams closed because the bytes queued to all clients exceeded the pod's budget (also counted as slow consumer drops)."},
			stat(func(st rooms.Stats) float64 { return float64(st.BudgetDrops) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_queued_bytes", Help: "Bytes waiting in all client queues at the last budget scan (0 with no budget)."},
			stat(func(st rooms.Stats) float64 { return float64(st.QueuedBytes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_room_repairs_total", Help: "Room repairs from the log (gaps, epoch changes, doorbell resets)."},
			stat(func(st rooms.Stats) float64 { return float64(st.Repairs) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_room_resyncs_total", Help: "Room gaps the log could not fill."},
			stat(func(st rooms.Stats) float64 { return float64(st.Resyncs) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_drain_state", Help: "Lifecycle state: 1 ready, 2 draining, 3 stopped."},
			func() float64 { return float64(s.drain.State()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_backend_up", Help: "1 when the log's backend answered its last health check, else 0 (readiness does not follow it)."},
			s.backendUp),
	}
	cs = append(cs, logCollectors(s.log)...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// rateMeter counts events per second over a sliding window of whole seconds.
type rateMeter struct {
	mu     sync.Mutex
	counts [rateWindow + 1]int64
	secs   [rateWindow + 1]int64
}

const rateWindow = 10 // seconds

func (m *rateMeter) add(now time.Time) {
	sec := now.Unix()
	i := sec % int64(len(m.counts))
	m.mu.Lock()
	if m.secs[i] != sec {
		m.secs[i], m.counts[i] = sec, 0
	}
	m.counts[i]++
	m.mu.Unlock()
}

// rate is the mean per second over the last rateWindow complete seconds.
func (m *rateMeter) rate(now time.Time) float64 {
	sec := now.Unix()
	var sum int64
	m.mu.Lock()
	for i := range m.counts {
		if d := sec - m.secs[i]; d >= 1 && d <= rateWindow {
			sum += m.counts[i]
		}
	}
	m.mu.Unlock()
	return float64(sum) / rateWindow
}
