package replay

import "time"

// ClientTTL reports how long client's entry in l has left on l's clock; false when
// there is none.
func ClientTTL(l *MemoryLog, client string) (time.Duration, bool) {
	o := l.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	now := l.cfg.Now()
	e, ok := o.liveLocked(client, now)
	if !ok {
		return 0, false
	}
	return e.expires.Sub(now), true
}
