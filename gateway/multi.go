package gateway

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/roomcast/roomcast/replay"
)

// A multiplexed stream, GET /events?room=a&room=b…, follows several rooms on one
// connection. Its frames are those of the rooms' own streams, except that each id is
// the stream's resume token (replay.ParseToken), which holds every room's position.
// It is a connection of several rooms (conn): the members ring one bell
// (rooms.JoinBell), and each write batch takes at most a per-room budget from each
// queue in turn, so a busy room cannot starve the others.

// MaxRoomsPerStreamLimit is the largest MaxRoomsPerStream accepted: 64 rooms'
// token stays within replay.MaxTokenLen.
const MaxRoomsPerStreamLimit = 64

var (
	errBadRooms = newError(http.StatusBadRequest, "invalid_rooms",
		"name the stream's rooms as ?room=a&room=b, each 1 to 128 characters of A-Z a-z 0-9 . _ ~ -")
	errBadToken = newError(http.StatusBadRequest, "invalid_last_event_id",
		"the resume point of a multiplexed stream is a token of the same rooms, as its frames' ids carry")
)

func errTooManyRooms(max int) *apiError {
	return newError(http.StatusBadRequest, "too_many_rooms", "a stream follows at most "+strconv.Itoa(max)+" distinct rooms")
}

// streamRooms reads a multiplexed stream's rooms: sorted, distinct and valid.
func (s *Server) streamRooms(r *http.Request) ([]string, *apiError) {
	names := r.URL.Query()["room"]
	if len(names) == 0 {
		return nil, errBadRooms
	}
	for _, n := range names {
		if !replay.ValidRoom(n) {
			return nil, errBadRooms
		}
	}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > s.cfg.MaxRoomsPerStream {
		return nil, errTooManyRooms(s.cfg.MaxRoomsPerStream)
	}
	return names, nil
}

// muxResumePoint reads a multiplexed stream's token: the Last-Event-ID header, else
// the lastEventId query parameter (the header wins, as for one room).
func muxResumePoint(r *http.Request, names []string) ([]replay.Position, []bool, bool, *apiError) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return nil, nil, false, nil
	}
	pos, anchored, err := replay.ParseToken(v, names)
	if err != nil {
		return nil, nil, false, errBadToken
	}
	return pos, anchored, true, nil
}

// muxHead answers a HEAD of a multiplexed stream: the checks of a GET, with the
// status a GET would get, without joining, and without redeeming a ticket (see
// headSubscriber).
func (s *Server) muxHead(w http.ResponseWriter, r *http.Request) {
	names, aerr := s.streamRooms(r)
	if aerr == nil {
		_, _, _, aerr = muxResumePoint(r, names)
	}
	if aerr == nil {
		aerr = s.headSubscriber(r, names...)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	s.openStream(w)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) multiStream(w http.ResponseWriter, r *http.Request) {
	names, aerr := s.streamRooms(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	from, anchored, resumed, aerr := muxResumePoint(r, names)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	// A room resumes where the token holds its position; one the token holds no
	// position of (anchored) starts where its member joins, as a new stream's rooms.
	if from == nil {
		from = make([]replay.Position, len(names))
	}
	resumes := make([]bool, len(names))
	for i := range resumes {
		resumes[i] = resumed && !anchored[i]
	}
	s.serveStream(w, r, kindMux, names, from, resumes)
}
