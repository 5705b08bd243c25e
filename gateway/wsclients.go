package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/replay"
)

// One owner per client id: a hello claims the client in the owners registry (the
// fleet's, or the pod's own) as the connection's identity (see wsidentity.go), the
// connection it displaced is closed with 4409 on whichever pod holds it, and the
// claim is refreshed every OwnerTTL/3 while connected. A refresh that finds another
// owner closes the connection with 4409; one that finds no entry (it lapsed, or
// Redis lost it) claims the client again.

// registerWSMetrics registers the WebSocket transport's metrics.
func (s *Server) registerWSMetrics(reg prometheus.Registerer) error {
	s.wsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "roomcast_ws_closed_total", Help: "WebSocket connections ended, by close code (none: the peer went away or the socket broke).",
	}, []string{"code"})
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "roomcast_ws_connections", Help: "Open WebSocket connections.",
	}, func() float64 { return float64(s.wsOpen.Load()) })
	s.wsRateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "roomcast_ws_rate_limited_total", Help: "WebSocket messages over their connection's rate limit (--ws-rate), by outcome: warned (answered rate_limited), dropped, closed (1008).",
	}, []string{"outcome"})
	for _, o := range []string{"warned", "dropped", "closed"} {
		s.wsRateLimited.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{s.wsClosed, open, s.wsRateLimited} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// wsLocal returns the pod's connection of client, if it has one.
func (s *Server) wsLocal(client string) *wsConn {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	return s.wsByClient[client]
}

// owner is the connection as the registry records it.
func (wc *wsConn) owner() replay.Owner {
	return replay.Owner{Client: wc.client, Boot: wc.boot, Session: wc.session, Pod: wc.s.cfg.PodID, Identity: wc.identity}
}

// claim makes the connection its client's owner and closes the one it displaced.
func (wc *wsConn) claim() (websocket.StatusCode, string) {
	s := wc.s
	ctx, cancel := context.WithTimeout(wc.ctx, s.cfg.PublishTimeout)
	defer cancel()
	// One claim of a client id at a time on the pod, so that the pod's own map
	// follows the registry's order: a claim that returns late cannot displace one
	// the registry took after it.
	done, err := s.claimTurn(ctx, wc.client)
	if err != nil {
		return wsTryAgainLater, "the client registry is busy: reconnect later"
	}
	defer done()
	prev, err := s.owners.ClaimClient(ctx, wc.owner(), s.cfg.OwnerTTL)
	switch {
	case errors.Is(err, replay.ErrOtherIdentity):
		// Who holds it is for the log, not for the peer.
		wc.closeAttrs = append(wc.closeAttrs, "owner_identity", prev.Identity, "owner_pod", prev.Pod)
		return wsForbidden, "forbidden: another identity holds this client id"
	case errors.Is(err, replay.ErrSuperseded):
		wc.closeAttrs = append(wc.closeAttrs, "owner_boot", prev.Boot, "owner_pod", prev.Pod)
		return wsSuperseded, "superseded: a newer boot of this client is connected"
	case err != nil:
		s.cfg.Logger.Warn("websocket client not claimed", "client", wc.client, "identity", wc.identity, "pod", s.cfg.PodID, "err", err)
		if why := "the client registry (" + s.logName() + ") is unavailable: reconnect later"; len(why) <= 123 {
			return wsTryAgainLater, why
		}
		return wsTryAgainLater, "the client registry is unavailable: reconnect later"
	}
	s.wsMu.Lock()
	old := s.wsByClient[wc.client]
	s.wsByClient[wc.client] = wc
	s.wsMu.Unlock()
	// The pod's older connection is closed only when the registry names its
	// session as the one displaced; one it does not name lost the client already,
	// and its next refresh closes it.
	if old != nil && old != wc && prev.Session == old.session {
		old.kick(wsSuperseded, "superseded: the client connected again")
	}
	if prev.Session == "" || prev.Session == wc.session {
		return 0, ""
	}
	s.cfg.Logger.Info("websocket client taken over", "client", wc.client, "agent", wc.agent, "identity", wc.identity, "pod", s.cfg.PodID,
		"session", wc.session, "from_pod", prev.Pod, "from_session", prev.Session)
	if prev.Pod != "" && prev.Pod != s.cfg.PodID {
		if err := s.notices.NotifyPod(ctx, prev.Pod, closeNotice(wc.client, prev.Session)); err != nil {
			// Its next refresh fails and closes it.
			s.cfg.Logger.Warn("websocket owner's pod not notified", "client", wc.client, "pod", prev.Pod, "err", err)
		}
	}
	return 0, ""
}

// refresh extends the connection's claim, or claims the client again when the
// registry has no entry for it (it lapsed while the registry could not be reached,
// or Redis lost its data); false (and a 4409 kick) when another connection owns the
// client now. A registry that cannot be reached keeps the connection: the next
// refresh decides.
func (wc *wsConn) refresh() bool {
	s := wc.s
	ctx, cancel := context.WithTimeout(wc.ctx, s.cfg.PublishTimeout)
	defer cancel()
	claimed, err := s.owners.RefreshClient(ctx, wc.owner(), s.cfg.OwnerTTL)
	switch {
	case errors.Is(err, replay.ErrNotOwner):
		wc.kick(wsSuperseded, "superseded: another connection owns this client")
		return false
	case err != nil:
		s.cfg.Logger.Warn("websocket client not refreshed", "client", wc.client, "err", err)
		return true
	case claimed:
		s.cfg.Logger.Info("websocket client claimed again: the registry had no entry for it", "client", wc.client,
			"identity", wc.identity, "pod", s.cfg.PodID, "session", wc.session)
	}
	return true
}

// unregister forgets the connection on the pod and releases its claim, if it still
// holds it.
func (wc *wsConn) unregister() {
	wc.forget()
	wc.releaseClaim()
}

// forget forgets the connection on the pod.
func (wc *wsConn) forget() {
	s := wc.s
	s.wsMu.Lock()
	if s.wsByClient[wc.client] == wc {
		delete(s.wsByClient, wc.client)
	}
	s.wsMu.Unlock()
}

// releaseClaim releases the connection's claim in the registry, if it still holds
// it.
func (wc *wsConn) releaseClaim() {
	s := wc.s
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PublishTimeout)
	defer cancel()
	if err := s.owners.ReleaseClient(ctx, wc.client, wc.session); err != nil {
		s.cfg.Logger.Warn("websocket client not released", "client", wc.client, "err", err)
	}
}

// clientBody is GET /admin/clients/{id}: the client's connection on this pod, or
// where the fleet's registry says it is.
type clientBody struct {
	Client   string `json:"client"`
	Pod      string `json:"pod"`
	Boot     string `json:"boot"`
	Session  string `json:"session"`
	Identity string `json:"identity"` // "" for an entry an older version wrote
	// Agent is the version the client's hello named; known on the pod that holds
	// the connection only.
	Agent          string `json:"agent,omitempty"`
	Local          bool   `json:"local"`
	ConnectedSince string `json:"connected_since"`
	// The rest is known on the pod that holds the connection only.
	Rooms          map[string]clientRoomBody `json:"rooms,omitempty"`
	Unacknowledged int64                     `json:"unacknowledged"`
	LastFrameAt    string                    `json:"last_frame_at,omitempty"`
}

type clientRoomBody struct {
	Delivered      string `json:"delivered"`
	LastAck        string `json:"last_ack"` // "" before the first ack
	Unacknowledged int64  `json:"unacknowledged"`
}

var errBadClient = newError(http.StatusBadRequest, "invalid_client", "client ids are 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -")

func errNoClient(id string) *apiError {
	return newError(http.StatusNotFound, "not_found", "no live connection of client "+id)
}

// local describes the pod's own connection.
func (wc *wsConn) describe() clientBody {
	b := clientBody{Client: wc.client, Pod: wc.s.cfg.PodID, Boot: wc.boot, Session: wc.session, Identity: wc.identity, Agent: wc.agent, Local: true,
		ConnectedSince: wc.since.UTC().Format(time.RFC3339Nano), Rooms: map[string]clientRoomBody{},
		LastFrameAt: time.Unix(0, wc.lastSeen.Load()).UTC().Format(time.RFC3339Nano)}
	wc.mu.Lock()
	defer wc.mu.Unlock()
	for i := range wc.st {
		st := &wc.st[i]
		rb := clientRoomBody{Delivered: st.sent.String(), Unacknowledged: st.unacked}
		if st.acked {
			rb.LastAck = st.ack.String()
		}
		b.Rooms[st.room] = rb
		b.Unacknowledged += st.unacked
	}
	return b
}

func (s *Server) adminClient(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !replay.ValidClient(id) {
		writeError(w, errBadClient)
		return
	}
	if wc := s.wsLocal(id); wc != nil {
		writeJSON(w, http.StatusOK, wc.describe())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.PublishTimeout)
	defer cancel()
	o, ok, err := s.owners.ClientOwner(ctx, id)
	switch {
	case err != nil:
		s.cfg.Logger.Warn("client owner not read", "client", id, "err", err)
		writeError(w, s.storeUnavailable("client registry", err, "retry"))
	case !ok:
		writeError(w, errNoClient(id))
	default:
		writeJSON(w, http.StatusOK, clientBody{Client: id, Pod: o.Pod, Boot: o.Boot, Session: o.Session, Identity: o.Identity,
			ConnectedSince: o.Since.UTC().Format(time.RFC3339Nano)})
	}
}

// adminClientClose ends the client's connection, here or, through the registry, on
// the pod that holds it: with 4409 (?mode=kick, the default) or 1012
// (?mode=reconnect).
func (s *Server) adminClientClose(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !replay.ValidClient(id) {
		writeError(w, errBadClient)
		return
	}
	mode, aerr := parseCloseMode(r.URL.Query().Get("mode"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if wc := s.wsLocal(id); wc != nil {
		wc.kick(mode.code())
		s.cfg.Logger.Info("websocket client closed by an operator", "client", id, "mode", mode.String(), "agent", wc.agent)
		writeJSON(w, http.StatusOK, map[string]string{"client": id, "pod": s.cfg.PodID, "closed": "here"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.PublishTimeout)
	defer cancel()
	o, ok, err := s.owners.ClientOwner(ctx, id)
	if err == nil && ok && o.Pod != s.cfg.PodID {
		err = s.notices.NotifyPod(ctx, o.Pod, modeCloseNotice(id, o.Session, mode))
	}
	switch {
	case err != nil:
		s.cfg.Logger.Warn("client close not sent", "client", id, "err", err)
		writeError(w, s.storeUnavailable("client registry", err, "retry"))
	case !ok || o.Pod == s.cfg.PodID:
		// Owned here by a connection that has just ended, or by nobody.
		writeError(w, errNoClient(id))
	default:
		s.cfg.Logger.Info("websocket client close sent to its pod", "client", id, "pod", o.Pod, "mode", mode.String())
		writeJSON(w, http.StatusAccepted, map[string]string{"client": id, "pod": o.Pod, "closed": "notified"})
	}
}

// claimTurn is the queue of one client id's claims on the pod: the holder runs, the
// others wait for the token in turn.
type claimTurn struct {
	token   chan struct{} // holds one token while nobody claims
	waiters int           // claims holding or waiting for the turn; guarded by wsMu
}

// claimTurn waits for client's turn to claim on the pod, or for ctx; done ends the
// turn.
func (s *Server) claimTurn(ctx context.Context, client string) (done func(), err error) {
	s.wsMu.Lock()
	t := s.wsClaims[client]
	if t == nil {
		t = &claimTurn{token: make(chan struct{}, 1)}
		t.token <- struct{}{}
		s.wsClaims[client] = t
	}
	t.waiters++
	s.wsMu.Unlock()
	leave := func() {
		s.wsMu.Lock()
		if t.waiters--; t.waiters == 0 {
			delete(s.wsClaims, client)
		}
		s.wsMu.Unlock()
	}
	select {
	case <-t.token:
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("gateway: waiting to claim client %q: %w", client, ctx.Err())
	}
	return func() {
		t.token <- struct{}{}
		leave()
	}, nil
}
