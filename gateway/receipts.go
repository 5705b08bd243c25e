package gateway

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// Receipts: acknowledgements as fleet-wide facts. The pod keeps the last ack of
// each of its WebSocket clients per room (acked, from every ack frame) and records
// the ones that changed in the client's ownership entry once a second (flush), one
// pipelined write per second for all of the pod's clients: never a write per ack.
//
// A client's inbox is the room inbox.<client>. A publish to an inbox may wait for
// the owner's receipt, an ack of the event or a later one in the inbox, for a
// bounded time. The waiting pod watches for it itself when it holds the owner's
// connection; otherwise it sends the owner's pod a notice "wait <client> <id>
// <pod> <waiter>" on the pod channel the pods listen to already, that pod watches
// the client's acks, and the first ack that covers the id comes back at once as a
// notice "receipt <client> <id> <Unix ms> <waiter>": two small publishes per
// waiting publish, and no polling, so a receipt that arrives through another pod
// wakes the waiter as soon as it is sent. Notices are at most once: a waiter whose
// receipt notice is lost reads the owner's entry when its time is up, and finds the
// ack there if it was flushed (within a second).
//
// receipts.mu is a leaf: never held with another lock, nor across I/O.

const (
	// inboxPrefix names a client's inbox: the room inbox.<client>.
	inboxPrefix = "inbox."
	// ackFlushEvery is how often the pod records its clients' changed acks.
	ackFlushEvery = time.Second
	// maxAckClients bounds the clients whose acks the pod keeps; acks of further
	// clients are not recorded (counted, and logged rarely).
	maxAckClients = 100_000
	// maxReceiptWaiters bounds the publishes waiting for a receipt on one pod; a
	// further one is refused with 503 before it is published.
	maxReceiptWaiters = 1024
	// maxReceiptWatches bounds the waits (the pod's and other pods') the pod watches
	// its clients' acks for; a wait beyond it is answered when its time is up.
	maxReceiptWatches = 4096
	// maxReceiptNotices bounds the receipt notices waiting to be sent.
	maxReceiptNotices = 1024
	// DefaultReceiptWait and MaxReceiptWait bound how long a publish waits.
	DefaultReceiptWait = 5 * time.Second
	MaxReceiptWait     = 30 * time.Second
)

// clientReceipts is where clients' acks are recorded and read: replay.Receipts
// (the log's control plane's), declared here beside clientOwners.
type clientReceipts interface {
	RecordAcks(ctx context.Context, recs []replay.AckRecord) (int, error)
	ClientAck(ctx context.Context, client, room string) (replay.Owner, replay.Ack, bool, error)
}

// inboxClient returns the client whose inbox room is; ok is false for a room that
// is no client's inbox.
func inboxClient(room string) (string, bool) {
	c, ok := strings.CutPrefix(room, inboxPrefix)
	return c, ok && replay.ValidClient(c)
}

// covers reports whether ack acknowledges the event at want.
func covers(ack, want replay.Position) bool {
	return ack.Epoch != "" && ack.Epoch == want.Epoch && ack.Seq >= want.Seq
}

type receipts struct {
	s     *Server
	store clientReceipts // nil: acks are not recorded
	every time.Duration  // the flush interval

	mu       sync.Mutex
	clients  map[string]*clientAcks     // the pod's clients' last acks
	waiters  map[uint64]chan replay.Ack // the pod's waiting publishes; each holds one receipt
	watches  map[string][]receiptWatch  // client → the waits for its acks
	nwatches int
	next     uint64 // the last waiter id

	out       chan podNotice // receipt notices to send
	dropped   atomic.Uint64  // acks, watches and notices dropped by a bound
	droppedAt atomic.Int64   // when a drop was last logged, Unix ns
}

// clientAcks is one client's last acks on the pod, for its session.
type clientAcks struct {
	session string
	acks    map[string]replay.Ack // room → last ack
	dirty   map[string]bool       // rooms whose ack changed since the last flush
}

// receiptWatch is a wait for a client's ack of want in its inbox: of a publish on
// pod (this one, or another that sent a wait notice), until a time.
type receiptWatch struct {
	want   replay.Position
	pod    string
	waiter uint64
	until  time.Time
}

type podNotice struct{ pod, notice string }

func newReceipts(s *Server, store clientReceipts) *receipts {
	return &receipts{s: s, store: store, every: ackFlushEvery, clients: map[string]*clientAcks{},
		waiters: map[uint64]chan replay.Ack{}, watches: map[string][]receiptWatch{}, out: make(chan podNotice, maxReceiptNotices)}
}

// drop counts something a bound refused and logs it rarely.
func (r *receipts) drop(what string) {
	n := r.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := r.droppedAt.Load(); now-last >= int64(time.Minute) && r.droppedAt.CompareAndSwap(last, now) {
		r.s.cfg.Logger.Warn("receipts: "+what+" dropped: a bound is full", "dropped", n)
	}
}

// acked takes a client's ack (one the connection accepted) and wakes the waits it
// covers, even when a bound keeps it from being recorded. It does no I/O: the
// loop's workers call it.
func (r *receipts) acked(wc *wsConn, room, id string) {
	pos, err := replay.ParsePosition(id)
	if err != nil {
		return
	}
	a := replay.Ack{Room: room, ID: pos, At: time.UnixMilli(time.Now().UnixMilli())}
	r.mu.Lock()
	defer r.mu.Unlock()
	if room == inboxPrefix+wc.client {
		r.fireLocked(wc.client, a)
	}
	ca := r.clients[wc.client]
	switch {
	case ca == nil && len(r.clients) >= maxAckClients:
		r.drop("an ack")
		return
	case ca == nil || ca.session != wc.session:
		ca = &clientAcks{session: wc.session, acks: map[string]replay.Ack{}, dirty: map[string]bool{}}
		r.clients[wc.client] = ca
	}
	if _, ok := ca.acks[room]; !ok && len(ca.acks) >= replay.MaxAckRooms {
		r.drop("an ack")
		return
	}
	ca.acks[room], ca.dirty[room] = a, true
}

// fireLocked answers the waits for client's acks that a covers.
func (r *receipts) fireLocked(client string, a replay.Ack) {
	ws := r.watches[client]
	kept := ws[:0]
	for _, w := range ws {
		if !covers(a.ID, w.want) {
			kept = append(kept, w)
			continue
		}
		r.nwatches--
		r.answerLocked(client, w, a)
	}
	clear(ws[len(kept):])
	if len(kept) == 0 {
		delete(r.watches, client)
	} else {
		r.watches[client] = kept
	}
}

// answerLocked hands a to the waiter of w: here, or through a notice to its pod.
func (r *receipts) answerLocked(client string, w receiptWatch, a replay.Ack) {
	if w.pod == r.s.cfg.PodID {
		if ch := r.waiters[w.waiter]; ch != nil {
			select {
			case ch <- a:
			default:
			}
		}
		return
	}
	n := "receipt " + client + " " + a.ID.String() + " " + strconv.FormatInt(a.At.UnixMilli(), 10) + " " +
		strconv.FormatUint(w.waiter, 10)
	select {
	case r.out <- podNotice{w.pod, n}:
	default:
		r.drop("a receipt notice")
	}
}

// localAck returns the pod's last ack of client in room, for session ("": any).
func (r *receipts) localAck(client, session, room string) (replay.Ack, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ca := r.clients[client]
	if ca == nil || session != "" && ca.session != session {
		return replay.Ack{}, false
	}
	a, ok := ca.acks[room]
	return a, ok
}

// watch waits for client's ack of want in its inbox for the waiter on pod: at once
// when the pod's last ack of session covers it already.
func (r *receipts) watch(client, session string, w receiptWatch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ca := r.clients[client]; ca != nil && ca.session == session {
		if a, ok := ca.acks[inboxPrefix+client]; ok && covers(a.ID, w.want) {
			r.answerLocked(client, w, a)
			return
		}
	}
	if r.nwatches >= maxReceiptWatches {
		r.drop("a receipt watch")
		return
	}
	r.watches[client] = append(r.watches[client], w)
	r.nwatches++
}

// waiter makes a waiting publish's place, or false when the pod has
// maxReceiptWaiters already.
func (r *receipts) waiter() (uint64, chan replay.Ack, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.waiters) >= maxReceiptWaiters {
		return 0, nil, false
	}
	r.next++
	ch := make(chan replay.Ack, 1)
	r.waiters[r.next] = ch
	return r.next, ch, true
}

// done ends a waiter and the pod's watches for it.
func (r *receipts) done(client string, id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.waiters, id)
	ws := r.watches[client]
	kept := ws[:0]
	for _, w := range ws {
		if w.pod == r.s.cfg.PodID && w.waiter == id {
			r.nwatches--
			continue
		}
		kept = append(kept, w)
	}
	clear(ws[len(kept):])
	if len(kept) == 0 {
		delete(r.watches, client)
	} else {
		r.watches[client] = kept
	}
}

// notice serves a receipt's pod notice ("wait …" or "receipt …"); false for any
// other notice. It does no I/O.
func (r *receipts) notice(n string) bool {
	f := strings.Fields(n)
	if len(f) != 5 || f[0] != "wait" && f[0] != "receipt" {
		return false
	}
	pos, err := replay.ParsePosition(f[2])
	if err != nil || pos.Epoch == "" || !replay.ValidClient(f[1]) {
		r.s.cfg.Logger.Warn("ignored a malformed receipt notice")
		return true
	}
	client := f[1]
	if f[0] == "wait" {
		waiter, err := strconv.ParseUint(f[4], 10, 64)
		if err != nil || !replay.ValidPodID(f[3]) {
			r.s.cfg.Logger.Warn("ignored a malformed receipt notice")
			return true
		}
		if wc := r.s.wsLocal(client); wc != nil {
			r.watch(client, wc.session, receiptWatch{want: pos, pod: f[3], waiter: waiter, until: time.Now().Add(MaxReceiptWait)})
		}
		return true
	}
	ms, err1 := strconv.ParseInt(f[3], 10, 64)
	waiter, err2 := strconv.ParseUint(f[4], 10, 64)
	if err1 != nil || err2 != nil {
		r.s.cfg.Logger.Warn("ignored a malformed receipt notice")
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch := r.waiters[waiter]; ch != nil {
		select {
		case ch <- replay.Ack{Room: inboxPrefix + client, ID: pos, At: time.UnixMilli(ms)}:
		default:
		}
	}
	return true
}

// run flushes the pod's changed acks every r.every, sends receipt notices and
// forgets expired watches and the acks of connections that ended, until ctx ends;
// then it flushes once more.
func (r *receipts) run(ctx context.Context) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case n := <-r.out:
			nctx, cancel := context.WithTimeout(ctx, r.s.cfg.PublishTimeout)
			if err := r.s.notices.NotifyPod(nctx, n.pod, n.notice); err != nil {
				r.s.cfg.Logger.Warn("receipt notice not sent", "pod", n.pod, "err", err)
			}
			cancel()
		case now := <-t.C:
			r.flush(ctx)
			r.prune(now)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), r.s.cfg.PublishTimeout)
			r.flush(fctx)
			cancel()
			return
		}
	}
}

// flush records every client's acks that changed since the last flush, in batches
// of replay.MaxAckBatch clients.
func (r *receipts) flush(ctx context.Context) {
	if r.store == nil {
		return
	}
	var recs []replay.AckRecord
	r.mu.Lock()
	for client, ca := range r.clients {
		if len(ca.dirty) == 0 {
			continue
		}
		rec := replay.AckRecord{Client: client, Session: ca.session, Acks: make([]replay.Ack, 0, len(ca.dirty))}
		for room := range ca.dirty {
			rec.Acks = append(rec.Acks, ca.acks[room])
		}
		clear(ca.dirty)
		recs = append(recs, rec)
	}
	r.mu.Unlock()
	for len(recs) > 0 {
		n := min(len(recs), replay.MaxAckBatch)
		if _, err := r.store.RecordAcks(ctx, recs[:n]); errors.Is(err, replay.ErrClosed) {
			return
		} else if err != nil {
			// The next flush tries them again.
			r.s.cfg.Logger.Warn("acks not recorded", "clients", n, "err", err)
			r.redo(recs[:n])
		}
		recs = recs[n:]
	}
}

// redo marks the acks of records a flush could not write as changed again, unless
// a newer session of their client replaced them.
func (r *receipts) redo(recs []replay.AckRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range recs {
		if ca := r.clients[rec.Client]; ca != nil && ca.session == rec.Session {
			for _, a := range rec.Acks {
				ca.dirty[a.Room] = true
			}
		}
	}
}

// prune forgets watches past their time and the acks of clients whose connection
// left the pod.
func (r *receipts) prune(now time.Time) {
	r.mu.Lock()
	clients := make([]string, 0, len(r.clients))
	for c := range r.clients {
		clients = append(clients, c)
	}
	for c, ws := range r.watches {
		kept := ws[:0]
		for _, w := range ws {
			if now.Before(w.until) {
				kept = append(kept, w)
			}
		}
		r.nwatches -= len(ws) - len(kept)
		clear(ws[len(kept):])
		if len(kept) == 0 {
			delete(r.watches, c)
		} else {
			r.watches[c] = kept
		}
	}
	r.mu.Unlock()
	for _, c := range clients {
		wc := r.s.wsLocal(c)
		r.mu.Lock()
		if ca := r.clients[c]; ca != nil && len(ca.dirty) == 0 && (wc == nil || wc.session != ca.session) {
			delete(r.clients, c)
		}
		r.mu.Unlock()
	}
}
