package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/roomcast/roomcast/replay"
)

// Publishing that waits for a receipt (HTTP: the Wait-For header; WebSocket: the
// publish frame's wait_for), and GET /clients/{id}: a client's receipt status
// without publishing.

var (
	errNotInbox = newError(http.StatusBadRequest, "invalid_wait",
		"only a publish to a client's inbox, the room "+inboxPrefix+"<client>, may wait for a receipt")
	errWaitBusy = &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: 1,
		Message: "too many publishes wait for receipts on this pod: the event was not published; retry later"}
	errWaitBatch = newError(http.StatusBadRequest, "invalid_wait",
		"a batch cannot wait for receipts: publish to the inbox with POST /rooms/{room}/events")
	errNoInbox = newError(http.StatusBadRequest, "invalid_client",
		"a client with an inbox has an id of 1 to 122 characters of A-Z a-z 0-9 . _ ~ -")
)

// parseWaitFor reads a Wait-For header's values: one value, "ack", optionally with
// "; timeout=<n>ms" or "; timeout=<n>s" (1ms to MaxReceiptWait; default
// DefaultReceiptWait). Names are case-insensitive.
func parseWaitFor(values []string) (time.Duration, *apiError) {
	bad := func(why string) (time.Duration, *apiError) {
		return 0, newError(http.StatusBadRequest, "invalid_wait", "Wait-For: "+why+
			`; the form is "ack" or "ack; timeout=5s" (1ms to `+MaxReceiptWait.String()+")")
	}
	if len(values) != 1 {
		return bad("give it once")
	}
	v := values[0]
	if len(v) > 64 {
		return bad("too long")
	}
	parts := strings.Split(v, ";")
	if !strings.EqualFold(strings.TrimSpace(parts[0]), "ack") {
		return bad("only ack can be waited for")
	}
	d := DefaultReceiptWait
	if len(parts) > 2 {
		return bad("one parameter at most")
	}
	if len(parts) == 2 {
		name, val, ok := strings.Cut(strings.TrimSpace(parts[1]), "=")
		if !ok || !strings.EqualFold(name, "timeout") {
			return bad("the only parameter is timeout")
		}
		if d = parseWaitTimeout(val); d == 0 {
			return bad("a timeout is <n>ms or <n>s")
		}
	}
	if d > MaxReceiptWait {
		return bad("the timeout is over " + MaxReceiptWait.String())
	}
	return d, nil
}

// parseWaitTimeout reads "<n>ms" or "<n>s" (1 to 6 digits, not all zeros); 0 for
// anything else.
func parseWaitTimeout(v string) time.Duration {
	unit := time.Second
	num, ok := strings.CutSuffix(v, "ms")
	if ok {
		unit = time.Millisecond
	} else if num, ok = strings.CutSuffix(v, "s"); !ok {
		return 0
	}
	if len(num) == 0 || len(num) > 6 {
		return 0
	}
	n := 0
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0
		}
		n = n*10 + int(num[i]-'0')
	}
	return time.Duration(n) * unit
}

// wsWaitFor reads a publish frame's wait_for and wait_timeout_ms: 0 when the
// publish does not wait.
func wsWaitFor(f wsFrame) (time.Duration, *apiError) {
	bad := newError(0, "invalid_wait", `wait_for is "ack", and wait_timeout_ms 0 (5000) to `+
		strconv.FormatInt(MaxReceiptWait.Milliseconds(), 10)+", only with it")
	switch {
	case f.WaitFor == "" && f.WaitTimeoutMS == 0:
		return 0, nil
	case f.WaitFor != "ack" || f.WaitTimeoutMS < 0 || f.WaitTimeoutMS > MaxReceiptWait.Milliseconds():
		return 0, bad
	case f.WaitTimeoutMS == 0:
		return DefaultReceiptWait, nil
	}
	return time.Duration(f.WaitTimeoutMS) * time.Millisecond, nil
}

// clientStatus is a client's receipt status: GET /clients/{id}, and the answer of
// a publish whose receipt did not come.
type clientStatus struct {
	Client         string `json:"client"`
	Connected      bool   `json:"connected"`
	ConnectedSince string `json:"connected_since,omitempty"`
	Inbox          string `json:"inbox"`
	LastAck        string `json:"last_ack"`              // in the inbox; "" before the first
	LastAckAt      string `json:"last_ack_at,omitempty"` // when the client sent it
	// OldestUnackedAgeMS is the age of the oldest event in the inbox's history after
	// the last ack; 0 when there is none.
	OldestUnackedAgeMS int64 `json:"oldest_unacked_age_ms"`
}

// receiptBody answers a publish whose owner acknowledged it in time (201).
type receiptBody struct {
	Room    string `json:"room"`
	Epoch   string `json:"epoch"`
	Seq     uint64 `json:"seq"`
	ID      string `json:"id"`
	Client  string `json:"client"`
	AckedAt string `json:"acked_at"`
}

// unresponsiveBody answers a publish whose receipt did not come in time (202): it is
// published, and will be delivered.
type unresponsiveBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Room    string `json:"room"`
	Epoch   string `json:"epoch"`
	Seq     uint64 `json:"seq"`
	ID      string `json:"id"`
	clientStatus
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

const unresponsiveMessage = "the client did not acknowledge the event in time: it is published and will be delivered"

// receipt is how a waiting publish ended: acked (and when), or not (the client's
// status); status.Client is set either way.
type receipt struct {
	acked  bool
	at     time.Time
	status clientStatus
}

// publishWaiting publishes to a client's inbox and waits up to d for the owner's
// ack of the event.
func (s *Server) publishWaiting(ctx context.Context, room string, msg replay.Message, d time.Duration) (replay.Event, receipt, *apiError) {
	client, ok := inboxClient(room)
	if !ok {
		return replay.Event{}, receipt{}, errNotInbox
	}
	r := s.receipts
	id, ch, ok := r.waiter()
	if !ok {
		return replay.Event{}, receipt{}, errWaitBusy
	}
	defer r.done(client, id)
	ev, aerr := s.append(ctx, room, msg)
	if aerr != nil {
		return replay.Event{}, receipt{}, aerr
	}
	deadline := time.Now().Add(d)
	want := replay.Position{Epoch: ev.Epoch, Seq: ev.Seq}
	if a, ok := s.awaitReceipt(ctx, client, id, ch, want, deadline); ok {
		return ev, receipt{acked: true, at: a.At, status: clientStatus{Client: client}}, nil
	}
	// Its time is up: what the client's status says now (a receipt notice lost, or
	// an owner that moved, still shows here once flushed).
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	defer cancel()
	st, a, _, err := s.clientStatus(sctx, client, time.UnixMilli(ev.TS))
	if err != nil {
		s.cfg.Logger.Warn("client status not read", "client", client, "err", err)
	}
	if covers(a.ID, want) && !a.At.After(deadline) {
		return ev, receipt{acked: true, at: a.At, status: clientStatus{Client: client}}, nil
	}
	return ev, receipt{status: st}, nil
}

// awaitReceipt waits until deadline for the receipt of want from client's owner:
// watched here when the pod holds its connection, else asked of its pod.
func (s *Server) awaitReceipt(ctx context.Context, client string, id uint64, ch chan replay.Ack, want replay.Position, deadline time.Time) (replay.Ack, bool) {
	r := s.receipts
	if wc := s.wsLocal(client); wc != nil {
		r.watch(client, wc.session, receiptWatch{want: want, pod: s.cfg.PodID, waiter: id, until: deadline})
	} else if r.store != nil {
		rctx, cancel := context.WithDeadline(ctx, deadline)
		o, a, ok, err := r.store.ClientAck(rctx, client, inboxPrefix+client)
		switch {
		case err != nil:
			s.cfg.Logger.Warn("client ack not read", "client", client, "err", err)
		case ok && covers(a.ID, want):
			cancel()
			return a, true
		case ok && o.Pod != s.cfg.PodID:
			n := "wait " + client + " " + want.String() + " " + s.cfg.PodID + " " + strconv.FormatUint(id, 10)
			if err := s.notices.NotifyPod(rctx, o.Pod, n); err != nil {
				s.cfg.Logger.Warn("receipt wait not sent", "client", client, "pod", o.Pod, "err", err)
			}
		}
		cancel()
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case a := <-ch:
		return a, true
	case <-t.C:
	case <-ctx.Done():
	}
	return replay.Ack{}, false
}

// clientStatus reads client's receipt status: from the pod's own acks when it holds
// the connection, else from the owner's entry. published, when set, is the time of
// an event known to be unacknowledged, for when the history cannot say. found is
// false when no one owns the client.
func (s *Server) clientStatus(ctx context.Context, client string, published time.Time) (clientStatus, replay.Ack, bool, error) {
	room := inboxPrefix + client
	st := clientStatus{Client: client, Inbox: room}
	var a replay.Ack
	if wc := s.wsLocal(client); wc != nil {
		st.Connected, st.ConnectedSince = true, fmtTime(wc.since)
		a, _ = s.receipts.localAck(client, wc.session, room)
	} else if s.receipts.store != nil {
		o, ra, ok, err := s.receipts.store.ClientAck(ctx, client, room)
		if err != nil {
			return st, replay.Ack{}, false, err
		}
		if ok {
			st.Connected, st.ConnectedSince, a = true, fmtTime(o.Since), ra
		}
	}
	if a.ID.Epoch != "" {
		st.LastAck, st.LastAckAt = a.ID.String(), fmtTime(a.At)
	}
	st.OldestUnackedAgeMS = s.oldestUnacked(ctx, room, a.ID, published)
	return st, a, st.Connected, nil
}

// oldestUnacked is the age, in ms, of the first event of room after ack; when the
// history after ack is gone, that of published (zero: 0).
func (s *Server) oldestUnacked(ctx context.Context, room string, ack replay.Position, published time.Time) int64 {
	now := time.Now()
	evs, _, err := s.log.Since(ctx, room, ack, 1)
	if errors.Is(err, replay.ErrGap) && ack != (replay.Position{}) {
		evs, _, err = s.log.Since(ctx, room, replay.Position{}, 1)
	}
	switch {
	case err == nil && len(evs) > 0:
		return max(0, now.UnixMilli()-evs[0].TS)
	case err == nil || published.IsZero():
		return 0
	}
	return max(0, now.Sub(published).Milliseconds())
}

// publishReceipt serves POST /rooms/{room}/events with a Wait-For header: 201 with
// the ack's time, or 202 with the client's status.
func (s *Server) publishReceipt(w http.ResponseWriter, r *http.Request, room string, msg replay.Message) {
	d, aerr := parseWaitFor(r.Header.Values("Wait-For"))
	var ev replay.Event
	var rc receipt
	if aerr == nil {
		ev, rc, aerr = s.publishWaiting(r.Context(), room, msg, d)
	}
	switch {
	case aerr != nil:
		s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
		writeError(w, aerr)
	case rc.acked:
		writeJSON(w, http.StatusCreated, receiptBody{Room: room, Epoch: ev.Epoch, Seq: ev.Seq, ID: ev.ID(), Client: rc.status.Client,
			AckedAt: fmtTime(rc.at)})
	default:
		writeJSON(w, http.StatusAccepted, unresponsiveBody{Error: "unresponsive", Message: unresponsiveMessage,
			Room: room, Epoch: ev.Epoch, Seq: ev.Seq, ID: ev.ID(), clientStatus: rc.status})
	}
}

// wsAckedFrame answers a WebSocket publish whose receipt came: the published
// frame's fields, "receipt":"acked", the client and when it acked.
type wsAckedFrame struct {
	wsPublishedFrame
	Receipt string `json:"receipt"`
	Client  string `json:"client"`
	AckedAt string `json:"acked_at"`
}

// wsUnresponsiveFrame answers a WebSocket publish whose receipt did not come: the
// published frame's fields, "receipt":"unresponsive", a message and the client's
// status.
type wsUnresponsiveFrame struct {
	wsPublishedFrame
	Receipt string `json:"receipt"`
	Message string `json:"message"`
	clientStatus
}

// publishReceipt serves a publish frame that waits for a receipt.
func (wc *wsConn) publishReceipt(f wsFrame, msg replay.Message, d time.Duration) []byte {
	ev, rc, aerr := wc.s.publishWaiting(wc.ctx, f.Room, msg, d)
	if aerr != nil {
		wc.s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
		return wsErrorOf(f.Ref, f.Room, aerr)
	}
	pub := wsPublishedFrame{V: wsVersion, Kind: wsPublished, Ref: f.Ref, Room: ev.Room, ID: ev.ID(), Epoch: ev.Epoch, Seq: ev.Seq}
	if rc.acked {
		return wsJSON(wsAckedFrame{wsPublishedFrame: pub, Receipt: "acked", Client: rc.status.Client, AckedAt: fmtTime(rc.at)})
	}
	return wsJSON(wsUnresponsiveFrame{wsPublishedFrame: pub, Receipt: "unresponsive", Message: unresponsiveMessage, clientStatus: rc.status})
}

// clientRoute serves GET /clients/{id} on the public listener: the client's receipt
// status, for a publisher that may publish to its inbox.
func (s *Server) clientRoute(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !replay.ValidClient(id) {
		writeError(w, errBadClient)
		return
	}
	if _, ok := inboxClient(inboxPrefix + id); !ok || !replay.ValidRoom(inboxPrefix+id) {
		writeError(w, errNoInbox)
		return
	}
	p, aerr := s.publisher(r)
	if aerr == nil {
		aerr = s.mayPublish(p, inboxPrefix+id)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.PublishTimeout)
	defer cancel()
	st, _, found, err := s.clientStatus(ctx, id, time.Time{})
	switch {
	case err != nil:
		s.cfg.Logger.Warn("client status not read", "client", id, "err", err)
		writeError(w, s.storeUnavailable("client registry", err, "retry"))
	case !found:
		writeError(w, errNoClient(id))
	default:
		writeJSON(w, http.StatusOK, st)
	}
}
