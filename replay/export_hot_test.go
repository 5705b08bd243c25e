package replay

// SkipHotRings makes l drop every hot-room sub-channel ring for which skip reports
// true, as a lost SPUBLISH would.
func SkipHotRings(l *RedisLog, skip func(channel string, ev Event) bool) { l.hot.skip.Store(&skip) }

// CheckHotRooms runs one periodic hot-room check of l now.
func CheckHotRooms(l *RedisLog) { l.checkHotRooms() }
