package replay

// Sweep runs one sweep of l now.
func Sweep(l *MemoryLog) { l.sweep() }
