package replay

// SkipHotRings makes l drop every hot-room sub-channel ring for which skip reports
// true, as a lost SPUBLISH would.
func SkipHotRings(l *RedisLog, skip func(channel string, ev Event) bool) { l.hot.skip.Store(&skip) }

// CheckHotRooms runs one periodic hot-room check of l now.
func CheckHotRooms(l *RedisLog) { l.checkHotRooms() }

// HotMatch reports whether patterns make room hot.
func HotMatch(patterns []string, room string) bool {
	h, err := newRedisHot(&RedisConfig{HotRooms: patterns, PodID: "p", HotPartitions: 4})
	return err == nil && h.match(room)
}
