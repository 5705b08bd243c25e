package replay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// Group commit. Appends that arrive together go out together: while one flush is in
// flight, new Appends queue; when it ends, everything queued goes out in the next
// flush, as one DoMulti (one round trip per node, each event still its own FCALL,
// so seq, append and doorbell stay atomic per event). There is no timer: an idle
// log sends an Append at once, alone.
//
// Guarantees kept:
//   - per-room order: a flush sends its FCALLs in queue order, a room's FCALLs go to
//     one connection, and a flush starts only after the previous one answered;
//   - idempotency: each FCALL carries its own key;
//   - WAIT: with WaitReplicas set, one WAIT per node follows the flush's FCALLs to
//     that node on the same connection, and an event is acknowledged only when its
//     WAIT saw enough replicas;
//   - outcome per event: each FCALL's answer is decoded on its own, so one failed
//     FCALL fails one publish; a retryable failure is retried by its caller alone;
//   - deadlines: each caller waits no longer than its own context. An Append that
//     gives up while still queued is never sent; once sent, its outcome is unknown.

// maxFlush bounds the events of one flush; the rest wait for the next.
const maxFlush = 512

// Pending states.
const (
	pendQueued    int32 = iota
	pendTaken           // in a flush: it may run
	pendAbandoned       // its caller gave up before it was sent: it never will be
)

type pendingAppend struct {
	room  string
	msg   Message
	state atomic.Int32
	done  chan struct{} // closed once ev and err are set
	ev    Event
	err   error
}

type groupCommit struct {
	mu       sync.Mutex
	queue    []*pendingAppend
	spare    []*pendingAppend // the last flush's slice, reused
	flushing bool             // a flush loop runs

	pending atomic.Int64 // Appends enqueued and not yet answered
	flushes atomic.Uint64
	events  atomic.Uint64
}

// commit sends one validated message through the group commit and, when its FCALL
// failed in a way that allows it, retries it alone.
func (l *RedisLog) commit(ctx context.Context, room string, m Message) (Event, error) {
	p := &pendingAppend{room: room, msg: m, done: make(chan struct{})}
	l.enqueue(p)
	select {
	case <-p.done:
	case <-ctx.Done():
		if p.state.CompareAndSwap(pendQueued, pendAbandoned) {
			l.group.pending.Add(-1)
			return Event{}, fmt.Errorf("queued for a flush: %w", ctx.Err())
		}
		return Event{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
	ran := mayHaveRun(p.err)
	if p.err != nil && retryable(p.err, m.IdempotencyKey != "") {
		l.retries.Add(1)
		ev, err := l.append(ctx, room, m)
		return ev, unknownIf(ran, err)
	}
	return p.ev, unknownIf(ran, p.err)
}

// enqueue queues p and starts a flush loop when none runs.
func (l *RedisLog) enqueue(p *pendingAppend) {
	g := &l.group
	g.pending.Add(1)
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.flushing {
		g.mu.Unlock()
		return
	}
	g.flushing = true
	g.mu.Unlock()
	if !l.spawn(l.flushLoop) {
		g.mu.Lock()
		q := g.queue
		g.queue, g.flushing = nil, false
		g.mu.Unlock()
		for _, p := range q {
			p.finish(Event{}, ErrClosed, &g.pending)
		}
	}
}

// flushLoop flushes the queue until it is empty.
func (l *RedisLog) flushLoop() {
	g := &l.group
	for {
		g.mu.Lock()
		batch := g.queue
		if len(batch) > maxFlush {
			batch = batch[:maxFlush:maxFlush]
			g.queue = append(g.spare[:0], g.queue[maxFlush:]...)
			g.spare = nil
		} else {
			g.queue, g.spare = g.spare[:0], nil
		}
		if len(batch) == 0 {
			g.flushing = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		taken := batch[:0:0]
		for _, p := range batch {
			if p.state.CompareAndSwap(pendQueued, pendTaken) {
				taken = append(taken, p)
			}
		}
		if len(taken) > 0 {
			ctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
			l.flush(ctx, OpPublish, taken)
			cancel()
			g.flushes.Add(1)
			g.events.Add(uint64(len(taken)))
			for _, p := range taken {
				close(p.done)
				g.pending.Add(-1)
			}
		}
		clear(batch)
		g.mu.Lock()
		if cap(batch) <= maxFlush {
			g.spare = batch[:0]
		}
		g.mu.Unlock()
	}
}

func (p *pendingAppend) finish(ev Event, err error, pending *atomic.Int64) {
	p.ev, p.err = ev, err
	close(p.done)
	pending.Add(-1)
}

// flush sends ps in one DoMulti, observed as op, and sets each one's ev and err (it
// does not close done). Every FCALL is decoded on its own; with WaitReplicas set,
// each event's result also depends on the WAIT that followed it on its connection.
func (l *RedisLog) flush(ctx context.Context, op RedisOp, ps []*pendingAppend) {
	b := l.client.B()
	cmds := make([]rueidis.Completed, len(ps), len(ps)+1)
	for i, p := range ps {
		cmds[i] = l.publishCmd(b, p.room, p.msg)
	}
	switch {
	case l.cfg.WaitReplicas == 0:
		l.decodeFlush(ps, l.doMulti(ctx, op, l.client, cmds...), -1)
	case l.client.Mode() != rueidis.ClientModeCluster:
		// One node: the FCALLs, then one WAIT, on one connection (WAIT blocks, so the
		// client sends the lot on a dedicated one).
		cmds = append(cmds, l.waitCmd(b))
		l.decodeFlush(ps, l.doMulti(ctx, op, l.client, cmds...), len(ps))
	default:
		l.flushByNode(ctx, op, ps, cmds)
	}
}

func (l *RedisLog) waitCmd(b rueidis.Builder) rueidis.Completed {
	return b.Wait().Numreplicas(int64(l.cfg.WaitReplicas)).Timeout(l.cfg.WaitTimeout.Milliseconds()).Build()
}

// decodeFlush sets ps[i] from res[i]; wait, when not negative, is the index in res
// of the WAIT that covers them all.
func (l *RedisLog) decodeFlush(ps []*pendingAppend, res []rueidis.RedisResult, wait int) {
	for i, p := range ps {
		p.ev, p.err = decodePublish(res[i], p.room, p.msg)
		if p.err == nil && wait >= 0 {
			if p.err = l.waited(res[wait]); p.err != nil {
				p.ev = Event{}
			}
		}
	}
}

// flushByNode sends a cluster flush that must WAIT: the cluster client follows
// MOVED and ASK on its own, which would send an FCALL to one node and its WAIT to
// another, so each node's FCALLs and their one WAIT go to that node's own client,
// which follows nothing. An FCALL that meets a redirect fails as not run (its caller
// retries it alone) and the slot owners are read again.
func (l *RedisLog) flushByNode(ctx context.Context, op RedisOp, ps []*pendingAppend, cmds []rueidis.Completed) {
	owners, err := l.slotOwners(ctx)
	if err != nil {
		for _, p := range ps {
			p.err = err
		}
		return
	}
	nodes := l.client.Nodes()
	groups := make(map[string][]int)
	for i := range ps {
		addr := owners[cmds[i].Slot()]
		groups[addr] = append(groups[addr], i)
	}
	var wg sync.WaitGroup
	var stale atomic.Bool
	for addr, ix := range groups {
		node := nodes[addr]
		if node == nil {
			stale.Store(true)
			for _, i := range ix {
				ps[i].err = fmt.Errorf("slot owner %q unknown: %w", addr, rueidis.ErrNoSlot)
			}
			continue
		}
		wg.Go(func() {
			nc := make([]rueidis.Completed, 0, len(ix)+1)
			group := make([]*pendingAppend, 0, len(ix))
			for _, i := range ix {
				nc, group = append(nc, cmds[i]), append(group, ps[i])
			}
			nc = append(nc, l.waitCmd(node.B()))
			res := l.doMulti(ctx, op, node, nc...)
			l.decodeFlush(group, res, len(group))
			for _, r := range res[:len(group)] {
				if err := r.Error(); err != nil && classify(err) == failNotRun {
					stale.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if stale.Load() {
		l.slots.mu.Lock()
		l.slots.owners = nil
		l.slots.mu.Unlock()
	}
}

// slotMap caches which node owns each cluster slot, for flushByNode.
type slotMap struct {
	mu     sync.Mutex
	owners []string // "host:port" by slot; nil until read, and after a redirect
}

// slotOwners returns the owner of every slot, reading CLUSTER SLOTS when the map is
// unknown or stale.
func (l *RedisLog) slotOwners(ctx context.Context) ([]string, error) {
	l.slots.mu.Lock()
	owners := l.slots.owners
	l.slots.mu.Unlock()
	if owners != nil {
		return owners, nil
	}
	owners, err := l.readSlotOwners(ctx)
	if err != nil {
		return nil, err
	}
	l.slots.mu.Lock()
	l.slots.owners = owners
	l.slots.mu.Unlock()
	return owners, nil
}

// readSlotOwners reads the owner of every slot (CLUSTER SLOTS).
func (l *RedisLog) readSlotOwners(ctx context.Context) ([]string, error) {
	ranges, err := l.client.Do(ctx, l.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("cluster slots: %w", err)
	}
	owners := make([]string, 16384)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("cluster slots: malformed range %v: %w", f, err)
		}
		start, err1 := f[0].AsInt64()
		end, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err := errors.Join(err1, err2, err3); err != nil || len(node) < 2 || start < 0 || end >= 16384 || start > end {
			return nil, fmt.Errorf("cluster slots: malformed range %v: %v", f, err)
		}
		host, err1 := node[0].ToString()
		port, err2 := node[1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cluster slots: malformed node %v: %w", node, err)
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		for s := start; s <= end; s++ {
			owners[s] = addr
		}
	}
	return owners, nil
}

// waited reads a WAIT's answer: nil when enough replicas acknowledged.
func (l *RedisLog) waited(res rueidis.RedisResult) error {
	acked, err := res.AsInt64()
	if err != nil {
		// The event ran; whether it reached a replica is unknown.
		return fmt.Errorf("%w: wait: %w", ErrOutcomeUnknown, err)
	}
	if acked < int64(l.cfg.WaitReplicas) {
		return fmt.Errorf("%w: %w (%d of %d in %s)", ErrOutcomeUnknown, errNotReplicated, acked, l.cfg.WaitReplicas, l.cfg.WaitTimeout)
	}
	return nil
}
