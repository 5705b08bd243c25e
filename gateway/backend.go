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

// describer is the optional capability of a log that names its backend for people:
// its kind and address ("redis at 127.0.0.1:6379"), never a credential.
type describer interface {
	Describe() string
}

// logName names the log's backend in messages that say it cannot be reached: what
// the log says of itself, else its kind. Anything but printable ASCII is left out, so
// that the name fits on an SSE comment line and in a WebSocket close reason.
func (s *Server) logName() string {
	name := s.backend().Kind
	if d, ok := s.log.(describer); ok {
		name = d.Describe()
	}
	return printableASCII(name, 96)
}

// printableASCII keeps the printable ASCII characters of s, at most n bytes of them.
func printableASCII(s string, n int) string {
	b := make([]byte, 0, min(len(s), n))
	for i := 0; i < len(s) && len(b) < n; i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b = append(b, c)
		}
	}
	return string(b)
}
