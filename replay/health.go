package replay

import "time"

// Health is what a log knows of its backend: whether it can reach it now. It never
// decides readiness (every pod would turn unready together when a shared backend
// blips); it is reported as a metric and in stats.
type Health struct {
	// Kind names the backend: "memory" or "redis".
	Kind string
	// Up reports whether the backend answered its last check.
	Up bool
	// ChangedAt is when Up last changed, or when the log started.
	ChangedAt time.Time
}

// Health reports the embedded log's backend: itself, always up.
func (l *MemoryLog) Health() Health {
	return Health{Kind: "memory", Up: true, ChangedAt: l.started}
}

// Describe names the embedded log's backend for people: "memory".
func (l *MemoryLog) Describe() string { return "memory" }
