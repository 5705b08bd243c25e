// Package replay owns a room's history: epochs, and the Log that assigns each room a
// dense sequence, keeps a bounded replay history and rings a doorbell for every new
// event. The event envelope, its ids, resume tokens and names are the wire
// vocabulary of package wire, which replay names again (Event, Position, ValidRoom,
// …) for the code that keeps history.
//
// Beside the history it keeps the control plane a fleet shares, each part behind an
// interface of its own: Tickets and Revocations (control.go), Occupancy
// (occupancy.go), Owners and Notices (owners.go), Pods (pods.go), FleetStreams
// (streams.go). They are not the Log's: ControlOf
// returns a log's Control, the stores on the log's backend, each in a file of its
// own (control_memory.go, occupancy_redis.go, notices_redis.go, …). A RedisLog's
// stores share its one rueidis client (so its connections), its connection state,
// retries and call observer, and stop with its Close; a MemoryLog's are the pod's
// own, on its clock, and stop with it. The leaf package flight is the single-flight
// group through which concurrent identical Redis reads share one call.
//
// # Ids and epochs
//
// An event id is "<epoch>:<seq>". seq is dense per room and drawn from one authority,
// so a reader that saw seq n and then sees anything but n+1 knows it missed something.
// An epoch names one history of a room: it changes whenever that history is lost (an
// in-memory restart, a room forgotten after --history-ttl, a lost Redis key), so a
// position from an older history is never taken for a position in the new one. A bare
// "<seq>" means "in the current epoch". A seq has at most 15 digits (MaxSeq); a
// position beyond a room's head is a gap. ReadOn is the one rule for where a reader
// that cannot continue resyncs to.
//
// # Implementations
//
// MemoryLog is the embedded default: per-room ring buffers and an in-process doorbell,
// bounded by a room count, a byte budget and an idle TTL. It is complete on its own;
// one process is one product.
//
// RedisLog is the fleet's shared log on Redis 7 (standalone or cluster, through
// rueidis). Every key of a room carries the hash tag {room}: room:{r}:seq (epoch and
// seq), room:{r}:log (a Stream, entry ids <seq>-0, MAXLEN ~ History),
// room:{r}:idem:<key>, and the shard channel room:{r}. One Redis Function
// (roomcast.lua) validates, checks the idempotency key, assigns the seq, appends and
// SPUBLISHes atomically; a read-only one returns the head and the entries after a
// position together, so gap detection is exact. An event published with a time to
// live (Message.TTL) goes through roomcast_v1_publish_ttl instead, which stores its
// deadline (Event.Expires, ts plus the TTL on the node's clock, as MemoryLog does on
// the pod's) as the entry's field exp and in the doorbell after the type. It joined
// the library after publish: a node that an older pod gave its own library answers
// that it does not know the function, and the log loads the library again, as for
// any such answer. Older pods read such entries and doorbells as events without a
// deadline (a doorbell they cannot parse sends them to the log). Subscribe holds one SSUBSCRIBE loop
// per room that resubscribes after failovers and slot moves and rings a zero Event
// each time. Concurrent identical reads share one Redis call.
//
// Hot rooms (RedisConfig.HotRooms, hot.go) are the one place where rings are not
// atomic with the append: after the function, the publisher also SPUBLISHes the
// doorbell to the room's sub-channels room:{r#i}, and each pod subscribes to one of
// them. Such rings may come out of seq order (concurrent publishers) or not at all (a
// lost SPUBLISH); readers repair by the gap rule, and a periodic head check rings a
// zero Event when a hot room's head is ahead of the last doorbell heard.
//
// A RedisLog names every connection "roomcast:<pod id>" (SETNAME inside HELLO) and,
// on a goroutine of its own every ClientsInterval, asks each node for its pubsub
// connections (CLIENT LIST TYPE pubsub, on a pooled connection, never on the
// pipelined ones that carry the subscriptions) to report its own (Clients: live
// subscriber connections, nodes that should hold one and do not, the largest output
// buffer). It never runs on a call's path; a user without CLIENT LIST gets one
// warning and no sample (redis_clients.go).
//
// Both logs report their backend (Health: its kind, whether it answers, since when)
// and describe it for people (Describe: "memory", or "redis at <first seed>", never a
// credential), for the messages that say what cannot be reached.
//
// # Control plane
//
// Both control planes have Tickets (single-use tickets, bounded, with a TTL) and
// Revocations (revoked users and tokens until they may be forgotten, with watchers).
// A RedisLog's keep them under room: too, outside every room's keys:
// room:ticket:{<id>} (SET PX NX, GETDEL) and the sorted set and shard channel
// room:revoked (control_redis.go). Watching revocations remember those in force they
// wrote or read and write back those room:revoked lacks after each read of it, so a
// Redis that lost its data gets them back from any pod that knew them
// (control_redis_restore.go).
//
// Both also have Occupancy: each pod's member count of each room it holds, with a
// TTL, for operators. A RedisLog's keeps a room's records in the hash
// room:{r}:pods, written and read by two functions of the library on the node's
// clock (occupancy_redis.go); a MemoryLog's knows its own pod only.
//
// Both also have Pods: each pod id's liveness record, so that two live pods never
// share one id (they would count as one in occupancy and take each other's
// notices). A pod claims its id with a record naming its process (a random
// instance, host, pid, start time, admin address) for a TTL, refreshes it while it
// runs and releases it when it stops; a claim while another instance's record
// lives fails with ErrPodInUse and returns that record. A RedisLog's keeps the hash
// room:pod:{<pod>}:live with a TTL, claimed and refreshed by roomcast_v1_pod and
// released by roomcast_v1_pod_release, which compare the instance in Lua
// (pods_redis.go); a MemoryLog's is one map on its clock.
//
// Both also have FleetStreams: each pod's open connections, with a TTL, which a
// rebalancing pod compares with the fleet's mean. A RedisLog's keeps them all in one
// hash, room:fleet:{streams} (one slot: one call reads the fleet), written and read
// by two functions of the library on the node's clock (streams_redis.go); a count
// of 0 is a record, so an empty pod counts. A MemoryLog's is one map on its clock.
//
// # Client ownership
//
// Both also have Owners (owners.go): one live connection per client id across the
// fleet, and Notices, which carries a pod's "close" to the pod of the owner a claim
// displaced. An entry maps a client id ([A-Za-z0-9._~:-]{1,128}) to its owner: the
// client's boot (a UUIDv7 the client makes once per process start), the gateway's
// session (one WebSocket connection, [A-Za-z0-9_-]{1,64}) and pod (ValidPodID,
// as --pod-id), and when it was claimed; it lives for a TTL (1ms to 24h)
// that the owner refreshes while connected.
//
//   - Every entry names the owner's identity (whom the gateway says the connection
//     is; opaque here, 1 to MaxIdentityLen bytes of UTF-8). While it lives, a claim
//     by another identity fails with ErrOtherIdentity, returns the owner, and
//     changes nothing, whatever its boot. Once it is released or expired, anyone may
//     claim the client. An entry an older version wrote has no identity and binds
//     none.
//   - A claim of the same identity wins when nobody owns the client (or the entry
//     expired) or the registered boot is older than or equal to the claimant's
//     (equal: the same process reconnecting); it returns the owner it displaced,
//     whom the caller tells to close (NotifyPod to its pod). Against a newer boot it
//     fails with ErrSuperseded, returns that owner, and changes nothing.
//   - Boots compare as UUIDv7s: by their 48-bit Unix millisecond timestamp
//     (BootTime), then the rest, which is the byte order of the canonical lowercase
//     form. A boot that is not a UUIDv7 (36 characters 8-4-4-4-12, version 7,
//     variant 10; either case on input) is ErrBadBoot. Judging a boot's time is the
//     caller's business.
//   - Refresh and release act only while the session still owns the client: a
//     refresh from a displaced session fails with ErrNotOwner and changes nothing, so
//     a stale refresh that lands after a takeover can never extend or win back the
//     entry; a release by a non-owner does nothing. A refresh that finds no entry at
//     all (it expired while the owner could not reach the store, or the store lost
//     its data) claims the client again for the refreshing session.
//   - Pod notices are at-most-once: an owner that misses its "close" learns from its
//     next failed refresh.
//
// A MemoryLog's Owners keeps entries in one map on its clock (MemoryConfig.Now), at
// most 100 000 live ones (ErrFull beyond); its Notices delivers in process. A
// RedisLog's keeps each entry in the hash room:client:{<client>} (boot, session,
// pod, since in Unix ms, identity; PEXPIRE for the TTL); claim, refresh and release
// are the library's functions roomcast_v1_claim_as, roomcast_v1_refresh_as and
// roomcast_v1_release, each atomic and comparing identities and boots in Lua (the
// library keeps roomcast_v1_claim and roomcast_v1_refresh, which know no identity,
// for the pods of an older version during a rollout); ClientOwner reads with HMGET.
// Its Notices go to the shard channel room:pod:{<pod>} (notices_redis.go). Entries
// and notices read back are validated; malformed ones are counted
// (RedisStats.BadOwners) and ignored.
//
// # Receipts
//
// Both Owners also keep Receipts (receipts.go): each client's last ack per room and
// when it was sent, in its ownership entry, written by the owning session in
// batches (RecordAcks) and read with the owner (ClientAck). The acks live and die
// with the entry: a claim starts without any, a refresh keeps them, a release or
// an expiry forgets them; an entry keeps at most MaxAckRooms rooms. A RedisLog
// keeps them as the fields ack:<room> ("<epoch>:<seq> <Unix ms>") of the entry's
// hash, with their count in the field acks, written by the library's
// roomcast_v1_acks (only while the session owns the client) in one pipeline per
// batch; a MemoryLog in the entry itself.
//
// # Must not
//
// replay knows nothing about HTTP or about who listens. The doorbell callback it is
// given must not block: MemoryLog calls it with the room's lock held, which is what
// guarantees that rings arrive in seq order.
//
// # Concurrency
//
// Every Log method, and every method of the control plane's stores, is safe for
// concurrent use. MemoryLog locks, in order: a map shard's mutex, then a room's
// mutex, then a subscription shard's read lock; for revocations, a watcher's mutex,
// then the revocations' own. A revocation watcher's fn runs under its watcher's
// mutex, so calls never overlap. Each store's mutex is a leaf otherwise; the
// notices' mutex and a pod listener's are never held together, and a listener's fn
// runs under its own, so calls never overlap. A RedisLog's PodNotices runs fn on its
// caller's goroutine, and the log's Close waits for every PodNotices to return.
package replay
