package replay

// Sweep runs one sweep of l now.
func Sweep(l *MemoryLog) { l.sweep() }

// RoomOverhead is what each room's record is charged against MaxBytes, besides its
// name.
const RoomOverhead = roomOverhead
