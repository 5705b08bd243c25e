package replay

// GroupPending is how many Appends l holds that have not been answered yet: queued
// for the next flush or in the one running.
func GroupPending(l *RedisLog) int { return int(l.group.pending.Load()) }
