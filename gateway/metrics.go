package gateway

import (
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

	opened, resumed  prometheus.Counter // streamsOpened's children
	queueDepth       prometheus.Histogram
	fanoutLag        prometheus.Histogram
	publishToDeliver prometheus.Histogram
	policyResyncs    [rooms.NumPolicies]prometheus.Counter // by rooms.Policy
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
	for _, r := range []string{rejectDraining, rejectRate, rejectCapacity, rejectClientIP, rejectAnonymousRooms, rejectAnonymousRoomsIP, rejectUser} {
		m.streamsTurned.WithLabelValues(r)
	}
	m.streamsOpened.WithLabelValues("true")
	m.streamsOpened.WithLabelValues("false")
	m.resumed = m.streamsOpened.WithLabelValues("true")
	m.opened = m.streamsOpened.WithLabelValues("false")
	for _, code := range publishErrorCodes {
		m.publishErrors.WithLabelValues(code)
	}
	stat := func(f func(rooms.Stats) float64) func() float64 {
		return func() float64 { return f(s.rooms.Stats()) }
	}
	cs := []prometheus.Collector{
		m.streamsOpened, m.streamsClosed, m.streamsTurned, m.delivered, m.resyncsSent,
		m.published, m.publishErrors, m.publishSeconds, m.authRefused, m.ticketsIssued,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_streams_open", Help: "Open SSE streams."},
			stat(func(st rooms.Stats) float64 { return float64(st.Members) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_idle_loop_connections", Help: "Connections the idle loop's workers serve, without a goroutine each (0 with --idle-loop off)."},
			func() float64 {
				if s.loop == nil {
					return 0
				}
				return float64(s.loop.open.Load())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_rooms", Help: "Rooms with local members (or lingering)."},
			stat(func(st rooms.Stats) float64 { return float64(st.Rooms) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_bus_subscriptions", Help: "Doorbell subscriptions held by this pod."},
			stat(func(st rooms.Stats) float64 { return float64(st.Subscriptions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_queued_bytes", Help: "Bytes waiting in all client queues at the last budget scan (0 with no budget)."},
			stat(func(st rooms.Stats) float64 { return float64(st.QueuedBytes) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "roomcast_room_resyncs_total", Help: "Room gaps the log could not fill."},
			stat(func(st rooms.Stats) float64 { return float64(st.Resyncs) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcast_drain_state", Help: "Lifecycle state: 1 ready, 2 draining, 3 stopped."},
			func() float64 { return float64(s.drain.State()) }),
	}
	cs = append(cs, m.newCollectors(s)...)
	cs = append(cs, m.policyCollectors(s)...)
	cs = append(cs, logCollectors(s.log)...)
	cs = append(cs, redisCollectors(s.log)...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
