package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// Access control: who may listen, who may publish. The credentials themselves are
// auth's; this file applies them to the routes and to open streams.

var (
	errNoCredential = newError(http.StatusUnauthorized, "unauthorized",
		"this room needs a credential: Authorization: Bearer <token>, the session cookie or a ticket")
	errRevoked = newError(http.StatusUnauthorized, "unauthorized", "the credential was revoked")
)

func errNotGranted(what, room string) *apiError {
	return newError(http.StatusForbidden, "forbidden", "the credential does not grant "+what+" room "+room)
}

// refused reports whether err refuses a credential, rather than failing to check
// it (a ticket store that cannot be reached).
func refused(err error) bool {
	return errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrNoCredential)
}

// credentialError answers a credential auth refused: 401 with its reason, which
// never repeats the credential itself.
func credentialError(err error) *apiError {
	if errors.Is(err, auth.ErrNoCredential) {
		return errUnauthorized
	}
	return newError(http.StatusUnauthorized, "unauthorized", err.Error())
}

// subscriber authenticates a stream request for its rooms (one, or a multiplexed
// stream's): its principal, or the answer that refuses it (401 without a usable
// credential, 403 when any room is not granted). The credential is checked once, so
// a ticket is redeemed once. A ticket that cannot be redeemed because the backend is
// down is unavailable: the stream is then answered like any other stream the pod
// cannot serve now.
func (s *Server) subscriber(r *http.Request, rooms ...string) (auth.Principal, *apiError, bool) {
	p, err := s.auth.Subscriber(r.Context(), r)
	return s.granted(p, err, rooms)
}

// headSubscriber is subscriber for a HEAD of a stream: the answer a GET would get,
// without its side effect: a ticket is checked, not redeemed (it is single-use, and
// the GET that follows needs it). A credential that cannot be checked now is no
// refusal: the GET would be answered 200 too.
func (s *Server) headSubscriber(r *http.Request, rooms ...string) *apiError {
	p, err := s.auth.CheckSubscriber(r.Context(), r)
	_, aerr, _ := s.granted(p, err, rooms)
	return aerr
}

// granted is the answer to a stream's credential check: p and err from auth, for
// rooms. See subscriber.
func (s *Server) granted(p auth.Principal, err error, rooms []string) (auth.Principal, *apiError, bool) {
	switch {
	case err != nil && !refused(err):
		s.cfg.Logger.Warn("stream credential not checked", "err", err)
		return p, nil, true
	case errors.Is(err, auth.ErrRevoked):
		s.refuse("subscribe", "revoked")
		return p, credentialError(err), false
	case err != nil:
		s.refuse("subscribe", "credential")
		return p, credentialError(err), false
	}
	for _, room := range rooms {
		switch {
		case p.CanSubscribe(room):
		case p.Source == auth.SourceAnonymous:
			s.refuse("subscribe", "credential")
			return p, errNoCredential, false
		default:
			s.refuse("subscribe", "grant")
			return p, errNotGranted("subscribing to", room), false
		}
	}
	return p, nil, false
}

// publisher authenticates a publish: a static key or a JWT with publish grants.
// With no key of any kind configured, only loopback clients may publish.
func (s *Server) publisher(r *http.Request) (auth.Principal, *apiError) {
	p, err := s.auth.Publisher(r)
	switch {
	case errors.Is(err, auth.ErrRevoked):
		s.refuse("publish", "revoked")
		return p, credentialError(err)
	case err != nil:
		s.refuse("publish", "credential")
		return p, credentialError(err)
	case p.Source == auth.SourceAnonymous && !isLoopback(r.RemoteAddr):
		s.refuse("publish", "credential")
		return p, errForbidden
	}
	return p, nil
}

// mayPublish is the per-room check of a publisher's grants.
func (s *Server) mayPublish(p auth.Principal, room string) *apiError {
	if p.CanPublish(room) {
		return nil
	}
	s.refuse("publish", "grant")
	return errNotGranted("publishing to", room)
}

// access is the "access" part of /admin/stats.
func (s *Server) access() accessBody {
	b := accessBody{Mode: "open", Refused: map[string]uint64{}, TicketsIssued: s.ticketsIssued.Load()}
	if s.auth.Enabled() {
		b.Mode = "jwt"
	}
	b.Users, b.TopUsers = s.sessions.users(10)
	for i := range s.refusedCounts {
		b.Refused[refusedKinds[i]] = s.refusedCounts[i].Load()
	}
	return b
}

// refusedKinds names the refusals /admin/stats counts: route and reason.
var refusedKinds = [...]string{"subscribe_credential", "subscribe_revoked", "subscribe_grant", "publish_credential", "publish_revoked", "publish_grant"}

// refuse counts a refusal in the metric and in /admin/stats.
func (s *Server) refuse(route, reason string) {
	s.m.authRefused.WithLabelValues(route, reason).Inc()
	for i, k := range refusedKinds {
		if k == route+"_"+reason {
			s.refusedCounts[i].Add(1)
		}
	}
}

// sessions indexes open streams by the user and token they were opened with, so a
// revocation can end them, and counts the rooms anonymous streams hold, on the pod
// and per client address.
type sessions struct {
	mu    sync.Mutex
	byKey map[string]map[*rooms.Member]auth.Principal // "sub:<sub>" and "jti:<jti>"

	maxAnon      int                       // rooms anonymous streams may hold on the pod; 0: no cap
	maxAnonPerIP int                       // rooms they may hold per client address; 0: no quota
	anon         map[string]int            // room → anonymous streams in it (with a cap)
	anonByIP     map[string]map[string]int // address → room → its anonymous streams in it (with a quota)
}

func newSessions(maxAnon, maxAnonPerIP int) *sessions {
	return &sessions{byKey: map[string]map[*rooms.Member]auth.Principal{}, maxAnon: maxAnon, maxAnonPerIP: maxAnonPerIP,
		anon: map[string]int{}, anonByIP: map[string]map[string]int{}}
}

// holdAnonymous reserves rooms (distinct names) for one anonymous stream from addr
// ("": an address that is not counted), all or none. It refuses, naming the reject
// reason, when that would make anonymous streams hold more rooms than the pod's cap,
// or those from addr more than its quota. release undoes it.
func (ss *sessions) holdAnonymous(addr string, rooms ...string) (release func(), reason string) {
	capped, quota := ss.maxAnon > 0, ss.maxAnonPerIP > 0 && addr != ""
	if !capped && !quota {
		return func() {}, ""
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	mine := ss.anonByIP[addr]
	newOnPod, newForAddr := 0, 0
	for _, room := range rooms {
		if ss.anon[room] == 0 {
			newOnPod++
		}
		if mine[room] == 0 {
			newForAddr++
		}
	}
	switch {
	case capped && len(ss.anon)+newOnPod > ss.maxAnon:
		return nil, rejectAnonymousRooms
	case quota && len(mine)+newForAddr > ss.maxAnonPerIP:
		return nil, rejectAnonymousRoomsIP
	}
	if quota && mine == nil {
		mine = map[string]int{}
		ss.anonByIP[addr] = mine
	}
	for _, room := range rooms {
		if capped {
			ss.anon[room]++
		}
		if quota {
			mine[room]++
		}
	}
	return func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		for _, room := range rooms {
			if capped {
				if ss.anon[room]--; ss.anon[room] <= 0 {
					delete(ss.anon, room)
				}
			}
			if quota {
				if mine[room]--; mine[room] <= 0 {
					delete(mine, room)
				}
			}
		}
		if quota && len(mine) == 0 {
			delete(ss.anonByIP, addr)
		}
	}, ""
}

// anonymousAddress is the address whose quota an anonymous stream of r counts
// against: the one MaxStreamsPerIP counts, "" when it counts against none.
func (s *Server) anonymousAddress(r *http.Request) string {
	addr, counted := s.admission.address(r)
	if !counted {
		return ""
	}
	return addr.String()
}

func sessionKeys(p auth.Principal) []string {
	var keys []string
	if p.Sub != "" {
		keys = append(keys, "sub:"+p.Sub)
	}
	if p.JTI != "" {
		keys = append(keys, "jti:"+p.JTI)
	}
	return keys
}

// add indexes m under p's user and token; the returned func removes it.
func (ss *sessions) add(p auth.Principal, m *rooms.Member) func() {
	keys := sessionKeys(p)
	if len(keys) == 0 {
		return func() {}
	}
	ss.mu.Lock()
	for _, k := range keys {
		set := ss.byKey[k]
		if set == nil {
			set = map[*rooms.Member]auth.Principal{}
			ss.byKey[k] = set
		}
		set[m] = p
	}
	ss.mu.Unlock()
	return func() {
		ss.mu.Lock()
		for _, k := range keys {
			if set := ss.byKey[k]; set != nil {
				delete(set, m)
				if len(set) == 0 {
					delete(ss.byKey, k)
				}
			}
		}
		ss.mu.Unlock()
	}
}

// users returns how many users (by sub) have open streams, and the n with the most.
func (ss *sessions) users(n int) (int, []userStreams) {
	ss.mu.Lock()
	all := make([]userStreams, 0, len(ss.byKey))
	for k, set := range ss.byKey {
		if sub, ok := strings.CutPrefix(k, "sub:"); ok {
			all = append(all, userStreams{Sub: sub, Streams: len(set)})
		}
	}
	ss.mu.Unlock()
	slices.SortFunc(all, func(a, b userStreams) int {
		if a.Streams != b.Streams {
			return b.Streams - a.Streams
		}
		return strings.Compare(a.Sub, b.Sub)
	})
	return len(all), all[:min(n, len(all))]
}

// revoke ends the streams rev refuses: every stream of a token (jti), or every
// stream of a user (sub) opened with a token issued at or before the revocation.
// It returns how many it ended.
func (ss *sessions) revoke(rev replay.Revocation) int {
	ss.mu.Lock()
	var ended []*rooms.Member
	for m, p := range ss.byKey[rev.Kind+":"+rev.Value] {
		if rev.Kind == "sub" && !p.IssuedAt.IsZero() && p.IssuedAt.After(rev.At) {
			continue
		}
		ended = append(ended, m)
	}
	ss.mu.Unlock()
	n := 0
	for _, m := range ended {
		if m.Close(rooms.ReasonReauth) {
			n++
		}
	}
	return n
}

// expireAt ends m with a reauth when its credential expires; stop cancels that.
func expireAt(m *rooms.Member, exp time.Time) (stop func()) {
	if exp.IsZero() {
		return func() {}
	}
	t := time.AfterFunc(time.Until(exp), func() { m.Close(rooms.ReasonReauth) })
	return func() { t.Stop() }
}

// reauthFrame tells a client that its credential expired or was revoked: it gets a
// fresh one and resumes. It carries no id, so the client's resume point stays. Its
// data names the first room as "room" and, for a stream of several rooms, all of
// them as "rooms": {"room","rooms":[…],"exp"}.
func reauthFrame(exp int64, rooms ...string) []byte {
	n := 64
	for _, r := range rooms {
		n += len(r) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, "event: reauth\ndata: {\"room\":\""...)
	b = append(b, rooms[0]...)
	b = append(b, '"')
	if len(rooms) > 1 {
		b = append(b, ",\"rooms\":["...)
		for i, r := range rooms {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, r...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	b = append(b, ",\"exp\":"...)
	b = strconv.AppendInt(b, exp, 10)
	return append(b, "}\n\n"...)
}

// issueTicket serves POST /tickets: a single-use ticket for a browser's EventSource,
// which cannot send headers. With an empty body it is bound to the bearer token's
// (or the session cookie's) subscribe grants, user, token id and expiry; a ?ticket=
// is not a credential here, and is not redeemed. A backend holding a publish
// credential may instead send a JSON body {"sub","subscribe":[...],"exp"}, within what
// its own publish grants cover: a static key names any user and exp; a token only its
// own sub, and the ticket stays bound to the token (auth.TicketFor).
func (s *Server) issueTicket(w http.ResponseWriter, r *http.Request) {
	raw, aerr := readBody(w, r, maxTicketBody)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var p auth.Principal
	if len(bytes.TrimSpace(raw)) == 0 {
		var err error
		p, err = s.auth.Token(r)
		switch {
		case errors.Is(err, auth.ErrNoCredential) && r.URL.Query().Has("ticket"):
			writeError(w, errTicketForTicket)
			return
		case errors.Is(err, auth.ErrNoCredential):
			writeError(w, errTicketNeedsToken)
			return
		case err != nil:
			writeError(w, credentialError(err))
			return
		}
	} else {
		pub, aerr := s.publisher(r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		if !isJSON(r) {
			writeError(w, newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "send the ticket request as application/json"))
			return
		}
		req, err := auth.ParseTicketRequest(raw, time.Now())
		if err != nil {
			writeError(w, newError(http.StatusBadRequest, "invalid_ticket_request", err.Error()))
			return
		}
		for _, g := range req.Subscribe {
			if !pub.Publish.Covers(g) {
				writeError(w, newError(http.StatusForbidden, "forbidden", "the publish credential does not cover the grant "+string(g)))
				return
			}
		}
		if p, err = auth.TicketFor(pub, req); err != nil {
			writeError(w, errTicketOtherUser)
			return
		}
	}
	if s.auth.Revoked(p) {
		writeError(w, errRevoked)
		return
	}
	t, err := s.auth.IssueTicket(r.Context(), p)
	switch {
	case refused(err):
		writeError(w, credentialError(err))
		return
	case err != nil:
		s.cfg.Logger.Warn("ticket not issued", "sub", p.Sub, "err", err)
		writeError(w, s.storeUnavailable("ticket store", err, "no ticket was issued; retry later"))
		return
	}
	s.m.ticketsIssued.Inc()
	s.ticketsIssued.Add(1)
	writeJSON(w, http.StatusCreated, t)
}

var (
	errTicketNeedsToken = newError(http.StatusUnauthorized, "unauthorized",
		`a ticket is issued for a token: send Authorization: Bearer <token> (or the session cookie), or a publish credential and {"sub","subscribe"}`)
	errTicketForTicket = newError(http.StatusUnauthorized, "unauthorized",
		"a ticket is no credential for POST /tickets (it was not spent): send Authorization: Bearer <token> (or the session cookie)")
	errTicketOtherUser = newError(http.StatusForbidden, "forbidden",
		`a token may ask for a ticket for its own sub only: set "sub" to the token's sub, or ask with a static publish key`)
)

// maxTicketBody bounds a POST /tickets body.
const maxTicketBody = 16 << 10

// revokeRequest is the body of POST /admin/revoke: exactly one of sub and jti.
type revokeRequest struct {
	Sub string `json:"sub"`
	JTI string `json:"jti"`
}

// revoke serves POST /admin/revoke: the user's (sub) or the token's (jti)
// credentials are refused on every pod until they could have expired, and the
// streams they opened end with a reauth.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	raw, aerr := readBody(w, r, maxTicketBody)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req revokeRequest
	if err := decodeStrict(raw, &req); err != nil {
		writeError(w, newError(http.StatusBadRequest, "invalid_json", "send {\"sub\":\"…\"} or {\"jti\":\"…\"}"))
		return
	}
	kind, value := "sub", req.Sub
	if req.JTI != "" {
		kind, value = "jti", req.JTI
	}
	if (req.Sub == "") == (req.JTI == "") || len(value) > 256 {
		writeError(w, newError(http.StatusBadRequest, "invalid_revocation", "name exactly one of sub and jti, at most 256 bytes"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.PublishTimeout)
	defer cancel()
	if err := s.auth.Revoke(ctx, kind, value, s.cfg.MaxTokenAge); err != nil {
		if errors.Is(err, auth.ErrInvalid) || errors.Is(err, replay.ErrInvalid) {
			writeError(w, newError(http.StatusBadRequest, "invalid_revocation", "name exactly one of sub and jti: 1 to 256 bytes of UTF-8"))
			return
		}
		s.cfg.Logger.Warn("revocation failed", "kind", kind, "err", err)
		writeError(w, s.storeUnavailable("revocation store", err, "the revocation was not recorded for the fleet; retry"))
		return
	}
	s.cfg.Logger.Info("credentials revoked", "kind", kind, kind, value)
	writeJSON(w, http.StatusOK, map[string]string{"kind": kind, "value": value, "until": time.Now().Add(s.cfg.MaxTokenAge).UTC().Format(time.RFC3339)})
}

func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// decodeStrict decodes one JSON object into v: unknown fields and trailing data are
// errors.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}
