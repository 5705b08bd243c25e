// Package plan is roomcastctl's capacity planner: the fleet's capacity model turned
// into numbers. From the shape of a workload (pods, rooms, members per room, publish
// rate, payload, how the load balancer routes streams, how many Redis shards) it
// derives what each shared resource carries:
//
//   - E_pods, the pods one publish reaches: with round-robin routing the members of a
//     room land on pods independently and uniformly, so a room of M members is held
//     by E = P·(1 − (1 − 1/P)^M) of P pods on average; with room affinity it is
//     ceil(M / C) for C streams per pod (1 for a room that fits one pod);
//   - SSUBSCRIBEs: one per room per pod holding it, rooms × E_pods in all;
//   - Redis deliveries: every publish is pushed to each pod holding its room, so
//     publish rate × E_pods, spread over the shards by slot; one room is one slot,
//     so a hot room's pushes all leave one shard;
//   - client deliveries and egress per pod: every member gets every event of its
//     room, as an SSE frame whose size is that of a real frame the gateway encodes
//     (gateway.EventFrame), and the doorbell's size that of the push Redis sends;
//   - connections and memory per pod.
//
// Per-pod limits come from a cmd/loadgen -json report (DecodeLimits), per-shard
// limits from flags; a limit nobody measured is reported unknown, never guessed.
// Each resource's utilisation is its use over its limit, its scale factor the
// limit over the use: how many times more rooms of the same shape the fleet takes
// before that resource is full. The smallest scale factor names the resource that
// runs out first.
//
// The package does no I/O beyond reading the limits file and writing its output;
// Compute is a pure function, safe for concurrent use.
package plan
