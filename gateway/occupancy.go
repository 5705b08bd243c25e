package gateway

import (
	"cmp"
	"context"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/roomcast/roomcast/replay"
)

// Occupancy on the admin listener: which rooms this pod holds, and for one room,
// what this pod knows of it and which pods of the fleet hold it.

const (
	defaultRoomsLimit = 50
	maxRoomsLimit     = 1000
	// occupancyTimeout bounds the read of a room's fleet records.
	occupancyTimeout = 2 * time.Second
)

// roomOccupancy is the fleet's record of who holds each room: replay.Occupancy's
// read side (the log's control plane's; rooms.Reporter writes this pod's records).
type roomOccupancy interface {
	// Occupancy returns the pods whose record of room has not expired.
	Occupancy(ctx context.Context, room string) ([]replay.PodCount, error)
}

var (
	errBadLimit      = newError(http.StatusBadRequest, "invalid_limit", "limit must be an integer from 1 to 1000")
	errBadRoomPrefix = newError(http.StatusBadRequest, "invalid_room",
		"a room prefix is 1 to 128 characters of A-Z a-z 0-9 . _ ~ -")
)

func (s *Server) occupancyRoutes(r chi.Router) {
	r.Get("/admin/rooms", s.roomsList)
	r.Get("/admin/rooms/{room}", s.roomDetail)
}

// podID names this pod in answers: Config.PodID, else the hostname.
func (s *Server) podID() string {
	if s.cfg.PodID != "" {
		return s.cfg.PodID
	}
	if h, err := os.Hostname(); err == nil && replay.ValidPodID(h) {
		return h
	}
	return "roomcast"
}

type roomsListBody struct {
	Pod       string            `json:"pod"`
	Rooms     []roomMembersBody `json:"rooms"`
	Total     int               `json:"total"`
	Truncated bool              `json:"truncated"`
}

type roomMembersBody struct {
	Room    string `json:"room"`
	Members int    `json:"members"`
}

// roomsList answers GET /admin/rooms?prefix=P&limit=N: the rooms with members on
// this pod, most members first, then by name.
func (s *Server) roomsList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultRoomsLimit
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || len(v) > 1 || n < 1 || n > maxRoomsLimit {
			writeError(w, errBadLimit)
			return
		}
		limit = n
	}
	prefix := q.Get("prefix")
	if len(q["prefix"]) > 1 || (prefix != "" && !replay.ValidRoom(prefix)) {
		writeError(w, errBadRoomPrefix)
		return
	}
	top, total := s.rooms.TopRooms(prefix, limit)
	body := roomsListBody{Pod: s.podID(), Rooms: make([]roomMembersBody, len(top)), Total: total, Truncated: total > len(top)}
	for i, t := range top {
		body.Rooms[i] = roomMembersBody{Room: t.Room, Members: t.Members}
	}
	writeJSON(w, http.StatusOK, body)
}

type roomBody struct {
	Room         string        `json:"room"`
	Pod          string        `json:"pod"`
	Members      int           `json:"members"`
	Subscription string        `json:"subscription"`
	Epoch        string        `json:"epoch"`
	Head         uint64        `json:"head"`
	QueueDepth   queueDepth    `json:"queue_depth"`
	Fleet        []fleetMember `json:"fleet"`
	FleetMembers int           `json:"fleet_members"`
}

type queueDepth struct {
	P50 int `json:"p50"`
	P90 int `json:"p90"`
	P99 int `json:"p99"`
	Max int `json:"max"`
}

type fleetMember struct {
	Pod       string    `json:"pod"`
	Members   int       `json:"members"`
	UpdatedAt time.Time `json:"updated_at"`
}

// roomDetail answers GET /admin/rooms/{room}: this pod's members, subscription,
// head and queue depths, and every pod of the fleet holding the room. This pod's
// entry is its live count; the others' are their last records, at most one
// occupancy interval old. A fleet that cannot be read is 503.
func (s *Server) roomDetail(w http.ResponseWriter, r *http.Request) {
	room := chi.URLParam(r, "room")
	if !replay.ValidRoom(room) {
		writeError(w, errBadRoom)
		return
	}
	pod := s.podID()
	info := s.rooms.Room(room)
	var records []replay.PodCount
	if s.occupancy != nil {
		ctx, cancel := context.WithTimeout(r.Context(), occupancyTimeout)
		var err error
		records, err = s.occupancy.Occupancy(ctx, room)
		cancel()
		if err != nil {
			s.cfg.Logger.Warn("reading a room's occupancy failed", "room", room, "err", err)
			writeError(w, s.storeUnavailable("fleet's occupancy store", err, "the room's occupancy cannot be read now; retry later"))
			return
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	body := roomBody{
		Room: room, Pod: pod, Members: info.Members, Subscription: info.Subscription.String(),
		Epoch: info.Head.Epoch, Head: info.Head.Seq,
		QueueDepth: queueDepth{P50: info.QueueDepth.P50, P90: info.QueueDepth.P90, P99: info.QueueDepth.P99, Max: info.QueueDepth.Max},
		Fleet:      make([]fleetMember, 0, len(records)+1),
	}
	for _, p := range records {
		if p.Pod != pod {
			body.Fleet = append(body.Fleet, fleetMember{Pod: p.Pod, Members: p.Members, UpdatedAt: p.UpdatedAt.UTC()})
		}
	}
	if info.Members > 0 {
		body.Fleet = append(body.Fleet, fleetMember{Pod: pod, Members: info.Members, UpdatedAt: now})
	}
	slices.SortFunc(body.Fleet, func(a, b fleetMember) int {
		if c := cmp.Compare(b.Members, a.Members); c != 0 {
			return c
		}
		return cmp.Compare(a.Pod, b.Pod)
	})
	for _, f := range body.Fleet {
		body.FleetMembers += f.Members
	}
	writeJSON(w, http.StatusOK, body)
}
