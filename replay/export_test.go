package replay

// Sweep runs one sweep of l now.
func Sweep(l *MemoryLog) { l.sweep() }

// RoomOverhead is what each room's record is charged against MaxBytes, besides its
// name.
const RoomOverhead = roomOverhead

// ClientSamples is the number of samples l has taken of its own connections.
func ClientSamples(l *RedisLog) uint64 {
	l.clients.mu.Lock()
	defer l.clients.mu.Unlock()
	return l.clients.attempts
}

// ParseClientList exposes parseClientList: connections, largest omem, summed tot-mem.
func ParseClientList(text, name string) (n int, omem, mem int64) {
	c := parseClientList(text, name)
	return c.n, c.omem, c.mem
}
