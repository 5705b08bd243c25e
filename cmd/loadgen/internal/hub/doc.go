// Package hub is the yardstick: the minimal SSE hub a careful engineer would write
// with net/http alone, to measure roomcast against. It is used only by the load
// generator (in-process in tests, or served with loadgen -serve-hub); it is not part
// of the gateway.
//
// It speaks the subset of the wire protocol that throughput and latency depend on:
// POST /rooms/{room}/events and POST /events (batch) assign a dense per-room seq
// under the room's mutex and fan the frame out with a non-blocking send into each
// subscriber's bounded channel, dropping (ending the stream of) a subscriber whose
// channel is full; GET /rooms/{room}/events streams frames
// "id: hub:<seq>\ndata: <envelope>\n\n" after a first "retry: 3000"; GET /metrics
// answers go_goroutines in the Prometheus text format. There is no
// replay (Last-Event-ID is ignored), no auth and no heartbeat. Rooms are never
// forgotten, so their seqs stay dense for the life of the process.
//
// Concurrency: Hub.mu guards the room map; room.mu guards a room's seq and members
// and is held while a frame is built and offered to every member, so members see
// seqs in order. A stream's request goroutine is its only writer. Lock order:
// Hub.mu, then room.mu (never both at once in practice).
package hub
