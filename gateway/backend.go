package gateway

import (
	"time"

	"github.com/roomcast/roomcast/replay"
)

// healthReporter is the optional capability of a log that knows whether its backend
// is reachable. It feeds /admin/stats and roomcast_redis_up, never readiness: a
// shared backend that blips would turn every pod unready at once.
type healthReporter interface {
	Health() replay.Health
}

// backendBody is the "backend" field of /admin/stats.
type backendBody struct {
	Kind      string    `json:"kind"`
	Up        bool      `json:"up"`
	ChangedAt time.Time `json:"changed_at"`
}

// backend reports the log's backend; a log that cannot tell is taken as up.
func (s *Server) backend() backendBody {
	if h, ok := s.log.(healthReporter); ok {
		b := h.Health()
		return backendBody{Kind: b.Kind, Up: b.Up, ChangedAt: b.ChangedAt}
	}
	return backendBody{Kind: "unknown", Up: true, ChangedAt: s.started}
}
