package gateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

type roomsListAnswer struct {
	Pod   string `json:"pod"`
	Rooms []struct {
		Room    string `json:"room"`
		Members int    `json:"members"`
	} `json:"rooms"`
	Total     int  `json:"total"`
	Truncated bool `json:"truncated"`
}

type roomAnswer struct {
	Room         string `json:"room"`
	Pod          string `json:"pod"`
	Members      int    `json:"members"`
	Subscription string `json:"subscription"`
	Epoch        string `json:"epoch"`
	Head         uint64 `json:"head"`
	QueueDepth   struct {
		P50, P90, P99, Max int
	} `json:"queue_depth"`
	Fleet []struct {
		Pod       string    `json:"pod"`
		Members   int       `json:"members"`
		UpdatedAt time.Time `json:"updated_at"`
	} `json:"fleet"`
	FleetMembers int `json:"fleet_members"`
}

// getJSON GETs url, wants status and decodes the body into out (when not nil).
func getJSON(t testing.TB, url string, status int, out any) string {
	t.Helper()
	res := do(t, http.MethodGet, url, "")
	if res.status != status {
		t.Fatalf("GET %s: %d %s, want %d", url, res.status, res.body, status)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(res.body), out); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, res.body)
		}
	}
	return res.body
}

// listed renders a rooms answer as "room=members ..." for comparison.
func listed(a roomsListAnswer) string {
	var out []string
	for _, r := range a.Rooms {
		out = append(out, r.Room+"="+itoa(r.Members))
	}
	return strings.Join(out, " ")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// fleetOf renders a room answer's fleet as "pod=members ...".
func fleetOf(a roomAnswer) string {
	var out []string
	for _, f := range a.Fleet {
		out = append(out, f.Pod+"="+itoa(f.Members))
	}
	return strings.Join(out, " ")
}

// TestAdminRoomsLocal: GET /admin/rooms lists the pod's rooms by members, with a
// prefix and a limit; GET /admin/rooms/{room} tells one room's members,
// subscription, head and queue depths, and both follow members joining and
// leaving. Bad input is 400 with a JSON error.
func TestAdminRoomsLocal(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PodID: "pod-a"}})
	open := map[string][]*stream{}
	for room, n := range map[string]int{"occ.a": 3, "occ.b": 1, "occ.c": 2, "other": 2} {
		for range n {
			s := p.subscribe(t, room, "")
			s.nextAny()
			open[room] = append(open[room], s)
		}
	}
	var list roomsListAnswer
	getJSON(t, p.admin.URL+"/admin/rooms", http.StatusOK, &list)
	if list.Pod != "pod-a" || listed(list) != "occ.a=3 occ.c=2 other=2 occ.b=1" || list.Total != 4 || list.Truncated {
		t.Fatalf("GET /admin/rooms: %+v", list)
	}
	for _, tc := range []struct {
		query, want string
		total       int
		truncated   bool
	}{
		{"limit=2", "occ.a=3 occ.c=2", 4, true},
		{"prefix=occ.&limit=2", "occ.a=3 occ.c=2", 3, true},
		{"prefix=occ.", "occ.a=3 occ.c=2 occ.b=1", 3, false},
		{"prefix=other&limit=1000", "other=2", 1, false},
		{"prefix=zzz", "", 0, false},
	} {
		var l roomsListAnswer
		body := getJSON(t, p.admin.URL+"/admin/rooms?"+tc.query, http.StatusOK, &l)
		if listed(l) != tc.want || l.Total != tc.total || l.Truncated != tc.truncated || !strings.Contains(body, `"rooms":[`) {
			t.Errorf("?%s: %s, want %q total %d truncated %v", tc.query, body, tc.want, tc.total, tc.truncated)
		}
	}
	for _, tc := range []struct{ path, code string }{
		{"/admin/rooms?limit=0", "invalid_limit"},
		{"/admin/rooms?limit=1001", "invalid_limit"},
		{"/admin/rooms?limit=ten", "invalid_limit"},
		{"/admin/rooms?limit=-1", "invalid_limit"},
		{"/admin/rooms?prefix=a%7Bb", "invalid_room"},
		{"/admin/rooms?prefix=" + strings.Repeat("a", 129), "invalid_room"},
		{"/admin/rooms/a%7Bb%7D", "invalid_room"},
		{"/admin/rooms/a:b", "invalid_room"},
		{"/admin/rooms/" + strings.Repeat("a", 129), "invalid_room"},
	} {
		var e struct{ Error, Message string }
		getJSON(t, p.admin.URL+tc.path, http.StatusBadRequest, &e)
		if e.Error != tc.code || e.Message == "" {
			t.Errorf("GET %s: %+v, want error %s with a message", tc.path, e, tc.code)
		}
	}

	id := ""
	for range 2 {
		id = p.publish(t, "occ.a", `{"x":1}`)
	}
	for _, s := range open["occ.a"] {
		for s.next().id != id {
		}
	}
	var room roomAnswer
	getJSON(t, p.admin.URL+"/admin/rooms/occ.a", http.StatusOK, &room)
	epoch, _, _ := strings.Cut(id, ":")
	if room.Room != "occ.a" || room.Pod != "pod-a" || room.Members != 3 || room.Subscription != "subscribed" ||
		room.Epoch != epoch || room.Head != 2 || room.FleetMembers != 3 || fleetOf(room) != "pod-a=3" {
		t.Fatalf("GET /admin/rooms/occ.a: %+v", room)
	}
	if d := time.Since(room.Fleet[0].UpdatedAt); d < 0 || d > time.Minute {
		t.Fatalf("this pod's fleet entry updated %s ago", d)
	}

	// A room nobody holds: every field, zeros, an empty fleet.
	body := getJSON(t, p.admin.URL+"/admin/rooms/nobody", http.StatusOK, nil)
	var raw map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"room": "nobody", "pod": "pod-a", "members": 0.0, "subscription": "none", "epoch": "", "head": 0.0,
		"queue_depth": map[string]any{"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}, "fleet": []any{}, "fleet_members": 0.0}
	if !reflect.DeepEqual(raw, want) {
		t.Fatalf("a room nobody holds: %s", body)
	}

	// Members leave: the answers follow.
	for _, s := range open["occ.a"][:2] {
		s.close()
	}
	replaytest.Eventually(t, 5*time.Second, "occ.a down to 1 member", func() bool {
		var r roomAnswer
		getJSON(t, p.admin.URL+"/admin/rooms/occ.a", http.StatusOK, &r)
		return r.Members == 1 && fleetOf(r) == "pod-a=1"
	})
	getJSON(t, p.admin.URL+"/admin/rooms?prefix=occ.", http.StatusOK, &list)
	if listed(list) != "occ.c=2 occ.a=1 occ.b=1" {
		t.Fatalf("after two left occ.a: %s", listed(list))
	}
	for _, s := range append(open["occ.b"], open["occ.a"][2]) {
		s.close()
	}
	replaytest.Eventually(t, 5*time.Second, "occ.a and occ.b unlisted", func() bool {
		var l roomsListAnswer
		getJSON(t, p.admin.URL+"/admin/rooms?prefix=occ.", http.StatusOK, &l)
		return listed(l) == "occ.c=2" && l.Total == 1
	})
}

// TestAdminRoomsNeedTheAdminToken: the occupancy routes sit behind the admin token.
func TestAdminRoomsNeedTheAdminToken(t *testing.T) {
	const token = "occupancy-admin-token"
	p := newPod(t, podConfig{gw: gateway.Config{AdminToken: token}})
	for _, path := range []string{"/admin/rooms", "/admin/rooms/a"} {
		if res := do(t, http.MethodGet, p.admin.URL+path, ""); res.status != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, res.status)
		}
		if res := do(t, http.MethodGet, p.admin.URL+path, "", "Authorization", "Bearer "+token); res.status != http.StatusOK {
			t.Errorf("GET %s with the token: %d %s", path, res.status, res.body)
		}
	}
	if res := do(t, http.MethodGet, p.public.URL+"/admin/rooms", ""); res.status == http.StatusOK {
		t.Errorf("GET /admin/rooms on the public listener: 200")
	}
}

// TestAdminRoomFleetUnreadable: while the fleet's records cannot be read (Redis
// unreachable), a room's answer is 503 with a JSON error and Retry-After; the list of
// this pod's rooms needs no backend and still answers.
func TestAdminRoomFleetUnreadable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := replay.NewRedisLog(ctx, replay.RedisConfig{Addrs: []string{"127.0.0.1:1"}, Timeout: 200 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p := newPodOn(t, l, podConfig{gw: gateway.Config{PodID: "pod-a"}})
	res := do(t, http.MethodGet, p.admin.URL+"/admin/rooms/a", "")
	var e struct{ Error, Message string }
	if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" ||
		json.Unmarshal([]byte(res.body), &e) != nil || e.Error != "unavailable" || e.Message == "" {
		t.Fatalf("GET /admin/rooms/a with Redis down: %d %v %s", res.status, res.header, res.body)
	}
	var list roomsListAnswer
	getJSON(t, p.admin.URL+"/admin/rooms", http.StatusOK, &list)
	if list.Pod != "pod-a" || len(list.Rooms) != 0 || list.Total != 0 {
		t.Fatalf("GET /admin/rooms with Redis down: %+v", list)
	}
}
