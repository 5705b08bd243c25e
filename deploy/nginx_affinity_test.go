package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// affinityRoutes are the requests of one room that must reach one gateway: its
// stream and publishes, a multiplexed stream whose first room it is, and an agent's
// WebSocket URL naming it as main room.
var affinityRoutes = []struct{ method, path string }{
	{"GET", "/rooms/%s/events"},
	{"POST", "/rooms/%s/events"},
	{"GET", "/events?room=%s&room=elsewhere"},
	{"GET", "/ws?room=%s"},
}

// affinityRooms is how many rooms the check routes; affinityUpstreams how many
// stand-in gateways it routes them to.
const (
	affinityRooms     = 24
	affinityUpstreams = 3
)

// checkNginxAffinity runs nginx.conf itself with its upstream server line replaced
// by three stand-in gateways and checks the room affinity: every route of a room
// reaches one gateway, the rooms spread over more than one, and requests without a
// room (an empty hash key) are not all sent to one gateway either.
func checkNginxAffinity(tree *deployTree, _ *deployment) error {
	data, err := nginxConfWithUpstream(tree)
	if data == nil || err != nil {
		return err
	}
	var servers []string
	for i := range affinityUpstreams {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Upstream", fmt.Sprint(i))
			w.WriteHeader(http.StatusNoContent)
		}))
		defer up.Close()
		servers = append(servers, strings.TrimPrefix(up.URL, "http://"))
	}
	addr, logs, stop, err := runNginx(func(listen string) string { return renderNginx(data, listen, servers...) })
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := &http.Client{}
	upstream := func(method, path string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(""))
		if err != nil {
			return "", err
		}
		res, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			return "", fmt.Errorf("%s %s through nginx: status %d\n%s", method, path, res.StatusCode, logs())
		}
		return res.Header.Get("X-Upstream"), nil
	}
	var errs []error
	roomsOn := map[string]int{}
	for i := range affinityRooms {
		room := fmt.Sprintf("affinity-%d", i)
		first := ""
		for _, r := range affinityRoutes {
			path := fmt.Sprintf(r.path, room)
			up, err := upstream(r.method, path)
			if err != nil {
				return err
			}
			switch {
			case first == "":
				first = up
				roomsOn[up]++
			case up != first:
				errs = append(errs, fmt.Errorf("room %s: %s %s reached gateway %s, its other routes gateway %s (hash $room_key)", room, r.method, path, up, first))
			}
		}
	}
	if len(roomsOn) < 2 {
		errs = append(errs, fmt.Errorf("%d rooms all reached one gateway: the room is not hashed", affinityRooms))
	}
	noRoom := map[string]bool{}
	for range 2 * affinityUpstreams {
		up, err := upstream("GET", "/healthz")
		if err != nil {
			return err
		}
		noRoom[up] = true
	}
	if len(noRoom) < 2 {
		errs = append(errs, errors.New("requests without a room all reached one gateway: an empty key must fall back to round-robin"))
	}
	return errors.Join(errs...)
}
