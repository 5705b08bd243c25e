package gateway

import (
	"net/http"
	"strconv"
	"time"
)

// statsBody is /admin/stats. Its counters read the same counters as the metrics
// (roomcast_events_published_total, roomcast_client_drops_total, ...), never
// counters of their own.
type statsBody struct {
	State             string            `json:"state"`
	Accepting         bool              `json:"accepting"`
	Connections       int64             `json:"connections"`
	Rooms             int64             `json:"rooms"`
	Subscriptions     int64             `json:"subscriptions"`
	Drops             map[string]uint64 `json:"drops"`
	QueuedBytes       int64             `json:"queued_bytes"`
	BudgetDrops       uint64            `json:"budget_drops"`
	Published         uint64            `json:"published"`
	Delivered         uint64            `json:"delivered"`
	Repairs           uint64            `json:"repairs"`
	Resyncs           uint64            `json:"resyncs"`
	GapsRepaired      uint64            `json:"gaps_repaired"`
	Forks             uint64            `json:"forks"`
	ResyncsSent       uint64            `json:"resyncs_sent"`
	ConnectsPerSecond float64           `json:"connects_per_second"`
	ResumesPerSecond  float64           `json:"resumes_per_second"`
	UptimeSeconds     float64           `json:"uptime_seconds"`
	Drain             drainBody         `json:"drain"`
	Backend           backendBody       `json:"backend"`
	Access            accessBody        `json:"access"`

	// MultiplexedStreams: of the connections, the streams of several rooms (GET /events).
	MultiplexedStreams int64 `json:"multiplexed_streams"`
	// WebSockets: of the connections, the WebSocket ones (GET /ws).
	WebSockets int64 `json:"websockets"`
}

// accessBody is access control at a glance: the mode, the users streaming (by sub;
// never a metric label, whose values would grow with the users), and what was
// refused or issued.
type accessBody struct {
	Mode          string            `json:"mode"` // "jwt": rooms are private; "open": no JWT key
	Users         int               `json:"users"`
	TopUsers      []userStreams     `json:"top_users"`
	Refused       map[string]uint64 `json:"refused"`
	TicketsIssued uint64            `json:"tickets_issued"`
}

type userStreams struct {
	Sub     string `json:"sub"`
	Streams int    `json:"streams"`
}

type drainBody struct {
	Closed         int64   `json:"closed"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

func (s *Server) stats(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	st := s.rooms.Stats()
	p := s.drain.Progress()
	writeJSON(w, http.StatusOK, statsBody{
		State:             p.State.String(),
		Accepting:         s.drain.Accepting(),
		Connections:       s.conns.count(kindStream) + s.conns.count(kindMux) + s.conns.count(kindWS),
		Rooms:             st.Rooms,
		Subscriptions:     st.Subscriptions,
		Drops:             s.drops(),
		QueuedBytes:       st.QueuedBytes,
		BudgetDrops:       st.BudgetDrops,
		Published:         uint64(value(s.m.published)),
		Delivered:         uint64(value(s.m.delivered)),
		Repairs:           st.Repairs,
		Resyncs:           st.Resyncs,
		GapsRepaired:      st.GapsRepaired,
		Forks:             st.Forks,
		ResyncsSent:       uint64(value(s.m.resyncsSent)),
		ConnectsPerSecond: s.connects.rate(now),
		ResumesPerSecond:  s.resumes.rate(now),
		UptimeSeconds:     now.Sub(s.started).Seconds(),
		Drain:             drainBody{Closed: p.Closed, ElapsedSeconds: p.Elapsed.Seconds()},
		Backend:           s.backend(),
		Access:            s.access(),

		MultiplexedStreams: s.conns.count(kindMux),
		WebSockets:         s.wsOpen.Load(),
	})
}

// startDrain begins the pod's drain; the process exits when it has finished.
func (s *Server) startDrain(w http.ResponseWriter, _ *http.Request) {
	if s.drain.Start() {
		s.cfg.Logger.Info("drain requested on the admin listener")
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"state": s.drain.State().String()})
}

// shed closes up to ?count=N open streams (default 1), each with a final retry hint,
// without draining the pod: it moves clients to other pods after a scale-out.
func (s *Server) shed(w http.ResponseWriter, r *http.Request) {
	n := 1
	if v := r.URL.Query().Get("count"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 {
			writeError(w, newError(http.StatusBadRequest, "invalid_count", "count must be a non-negative integer"))
			return
		}
		n = c
	}
	writeJSON(w, http.StatusOK, map[string]int{"closed": s.conns.Shed(n)})
}
