// Package rooms is the pod-local registry: which streams are members of which room,
// one bus subscription per room however many members it has, fan-out of each event
// into bounded per-member queues, and per-room gap detection and repair from the log.
//
// # Flow
//
// The first Join of a room subscribes to the bus (concurrent joins share that one
// pending subscribe; a failed subscribe is rolled back and every waiter gets the
// error), then reads the room's head as the baseline for gap detection. The last
// Leave starts a short linger; a room still empty when it ends is unsubscribed.
//
// A ring with seq == last+1 in the room's epoch is delivered at once: one Item holding
// the event is sent, without blocking, to every member's queue. Rooms carry events,
// not any transport's bytes: an Item keeps each framing's encoding (Item.Encoded) once
// the first reader asked for it, shared by every member and reader of the same item,
// so fan-out to a thousand members of one transport encodes once. Anything else
// (a gap, a new epoch, the bus saying it may have missed events) starts a repair: one
// goroutine per room reads the log from the last delivered position and delivers in
// order; rings that arrive meanwhile only mark the room dirty, so the repair reads
// again. When the log cannot fill the gap every member gets a resync item, at the
// point replay.ReadOn chooses (before the first event of a new epoch when that is
// retained, else the head); a resync because the log lost or replaced events members
// were given is marked Fork. A member starts at the position the room had delivered
// when it was added (Member.Start): every later event reaches its queue. A member
// joined with JoinBell also rings a channel it shares with others on every item
// queued and on close, so one reader can serve many members.
//
// # Resumes
//
// Each open room keeps the items of its latest delivered events (recent.go),
// bounded by Config.Recent, RecentBytes and the pod's MaxRecentBytes: a dense run in
// one epoch ending at the room's delivered position, restarted by every resync and by
// any event that does not continue it. Since serves a resume from it when it holds the
// resume point; the first miss of a room reads the events before it back from the log
// (once per restart, shared by the misses that come meanwhile); other misses share one
// log read per position and limit, never one that began before they came.
//
// # Must not
//
// Block on any one member: a member whose queue is full is closed with
// ReasonSlowConsumer and resumes by id, unless its room's queue policy
// (Config.Policy, resolved once when the room opens; policy.go) drops older items
// instead: PolicyLatest keeps the newest alone, PolicyDropOldest drops the oldest
// half. Either takes the waiting items out under the room mutex and queues the kept
// ones again in order, keeping a fork notice; the reader finds the next event's seq
// past what it sent and says so with a resync. With Config.MaxQueuedBytes, a scan every
// BudgetInterval also closes the members with the most bytes queued first, as slow
// consumers (or sheds their queues by their policy), while the pod's total is over it: no shared counter on the fan-out path.
// rooms knows nothing about HTTP or any wire: the caller supplies its framings.
//
// # Measurements
//
// Stats holds the counters (drops, repairs, gaps repaired, resyncs, forks); an
// Observer set with Observe gets what a counter cannot carry: members' queue depths,
// sampled on a timer (a goroutine Close stops), and the fan-out lag of one ring in
// 8 of each room. Neither adds a write per member to the fan-out path.
//
// # Concurrency
//
// Lock order: shard mutex, then room mutex; the room mutex also guards the room's
// latest events and its shared reads. Neither is held across bus or log I/O;
// fan-out happens under the room mutex with non-blocking sends only. The budget scan
// estimates a member's queued bytes under the room mutex from what the fan-out
// already keeps: the large items' byte count, and the queue's length times the
// room's mean small item; it adds nothing to the fan-out path.
//
// Occupancy (occupancy.go): Room and TopRooms read member counts and a bounded
// sample of queue lengths under each room's mutex. A Reporter writes this pod's
// member counts to the fleet's store from its own goroutine; a last leave notes the
// room for it under a leaf mutex taken inside the room mutex, never blocking.
package rooms
