package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// Multiplexed SSE subscribers (-mux-streams N): N streams of GET
// /events?room=a&room=b…, each following -mux-rooms rooms. Every room of a stream is
// one member subscriber with its own Tracker and histogram, so a multiplexed member
// is counted, checked and reported as a single-room one is; the stream itself is
// held by its first member's goroutine. Frames are routed to the member of the room
// their data names; the stream's resume token (every frame's id) is kept by the
// stream, and each member starts where the first anchor's data says its room was.

// muxStream is one multiplexed stream; its lead member's goroutine owns it.
type muxStream struct {
	home    int // the stream's home pod index, before pods.pick
	members []*subscriber
	byRoom  map[string]*subscriber
	path    string // /events?room=…&room=…
	token   []byte // the resume token: the last id the stream carried
	keys    map[string][]byte
}

var keyRoom = []byte(`"room":"`)

// newMuxStream builds stream j over members (one per room, distinct rooms).
func newMuxStream(j int, members []*subscriber) *muxStream {
	m := &muxStream{home: j, members: members, byRoom: map[string]*subscriber{}, keys: map[string][]byte{}}
	q := url.Values{}
	for _, s := range members {
		m.byRoom[s.room.name] = s
		q.Add("room", s.room.name)
		s.mux = m
		// The anchor's data: {"rooms":{"<room>":"<id>",…}}.
		m.keys[s.room.name] = []byte(`"` + s.room.name + `":"`)
	}
	m.path = "/events?" + q.Encode()
	return m
}

// lead reports whether s holds its stream's connection.
func (m *muxStream) lead(s *subscriber) bool { return m.members[0] == s }

// streamMux holds one multiplexed connection for every member of s's stream; it
// returns nil on a clean end of stream.
func (s *subscriber) streamMux(ctx context.Context, ls *loadState) error {
	m := s.mux
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pod := ls.pods.pick(m.home)
	target := ls.pods.url(pod, m.path, ls.cfg.URL+m.path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errFatal, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if len(m.token) > 0 {
		req.Header.Set("Last-Event-ID", string(m.token))
	}
	resp, err := ls.subClient.Do(req)
	if err != nil {
		ls.connectErrors.Add(1)
		return fmt.Errorf("subscribe %s: %w", m.path, err)
	}
	defer resp.Body.Close()
	if err := checkStreamResponse(resp); err != nil {
		ls.connectErrors.Add(1)
		return fmt.Errorf("subscribe %s: %w", m.path, err)
	}
	for _, mem := range m.members {
		ls.streamOpened(mem, pod, cancel)
		mem.established(ls)
	}
	defer func() {
		for _, mem := range m.members {
			ls.streamClosed(mem)
		}
	}()
	return s.readEvents(resp.Body, m.token, m.path, func(ev gatewaytest.Event) { m.handle(ev, time.Now(), ls) })
}

// handle routes one frame of the stream to the member of its room.
func (m *muxStream) handle(ev gatewaytest.Event, now time.Time, ls *loadState) {
	if string(ev.Type) == gatewaytest.AnchorType {
		if len(m.token) == 0 {
			for _, mem := range m.members {
				if pos, ok := gatewaytest.StringAfter(ev.Data, m.keys[mem.room.name]); ok {
					mem.startAt(pos)
				}
			}
		}
		if ev.IDSet {
			m.token = append(m.token[:0], ev.ID...)
		}
		return
	}
	if string(ev.Type) == "reauth" {
		return
	}
	room, ok := gatewaytest.StringAfter(ev.Data, keyRoom)
	mem := m.byRoom[string(room)]
	if !ok || mem == nil {
		m.members[0].noteMalformed()
		return
	}
	// The id is the stream's token, not a room's position: each member takes its
	// epoch from the envelope (idSet false).
	kind := frameEvent
	switch string(ev.Type) {
	case "resync":
		kind = frameResync
	case gatewaytest.ExpiredType:
		kind = frameExpired
	}
	mem.check(kind, ev.ID, false, ev.Data, now, ls)
	if ev.IDSet {
		m.token = append(m.token[:0], ev.ID...)
	}
}
