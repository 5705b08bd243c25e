// Package replay owns a room's history: the event envelope and its ids, epochs, and
// the Log that assigns each room a dense sequence, keeps a bounded replay history and
// rings a doorbell for every new event.
//
// # Ids and epochs
//
// An event id is "<epoch>:<seq>". seq is dense per room and drawn from one authority,
// so a reader that saw seq n and then sees anything but n+1 knows it missed something.
// An epoch names one history of a room: it changes whenever that history is lost (an
// in-memory restart, a room forgotten after --history-ttl, a lost Redis key), so a
// position from an older history is never taken for a position in the new one. A bare
// "<seq>" means "in the current epoch".
//
// # Implementations
//
// MemoryLog is the embedded default: per-room ring buffers and an in-process doorbell,
// bounded by a room count, a byte budget and an idle TTL. It is complete on its own;
// one process is one product.
//
// # Must not
//
// replay knows nothing about HTTP or about who listens. The doorbell callback it is
// given must not block: MemoryLog calls it with the room's lock held, which is what
// guarantees that rings arrive in seq order.
//
// # Concurrency
//
// Every Log method is safe for concurrent use. MemoryLog locks, in order: a room's
// mutex, then a subscription shard's read lock; the map shard lock is never held
// while a room's mutex is taken.
package replay
