package replay

import "time"

// SetRevocationReload makes l's revocations read the whole set every d instead of
// every 5s; call it before the first WatchRevocations.
func SetRevocationReload(l *RedisLog, d time.Duration) {
	l.revs.mu.Lock()
	l.revs.every = d
	l.revs.mu.Unlock()
}
