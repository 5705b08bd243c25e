package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// holdStream opens room's stream on a gateway and keeps it open until t ends or
// the returned func is called. The member has joined once the headers are back.
func holdStream(t *testing.T, public, room string) (closeStream func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, public+"/rooms/"+room+"/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("stream of %s: %d", room, res.StatusCode)
	}
	go func() { _, _ = io.Copy(io.Discard, res.Body) }()
	stop := func() { cancel(); res.Body.Close() }
	t.Cleanup(stop)
	return stop
}

// fleetAnswer asks a pod's admin listener for room's fleet: "pod=members ..." in
// the order given, and the fleet's sum.
func fleetAnswer(admin, room string) (string, int, error) {
	res, err := http.Get(admin + "/admin/rooms/" + room)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	var a struct {
		Fleet []struct {
			Pod     string `json:"pod"`
			Members int    `json:"members"`
		} `json:"fleet"`
		FleetMembers int `json:"fleet_members"`
	}
	if res.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("status %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil {
		return "", 0, err
	}
	var out []string
	for _, f := range a.Fleet {
		out = append(out, fmt.Sprintf("%s=%d", f.Pod, f.Members))
	}
	return strings.Join(out, " "), a.FleetMembers, nil
}

// awaitFleet waits until every admin URL answers want for room.
func awaitFleet(t *testing.T, within time.Duration, room, want string, admins ...string) {
	t.Helper()
	replaytest.Eventually(t, within, "fleet of "+room+" = "+want, func() error {
		for _, admin := range admins {
			got, _, err := fleetAnswer(admin, room)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s answers %q", admin, got)
			}
		}
		return nil
	})
}

// TestFleetOccupancy: three pods on the 3-primary cluster. Each pod's members of a
// room show per pod on every pod's GET /admin/rooms/{room}; a pod killed with
// SIGKILL drops out within its records' TTL (3 intervals); a pod whose members all
// leave drops out at once, without waiting for its record to lapse.
func TestFleetOccupancy(t *testing.T) {
	c := redistest.SharedCluster(t)
	const interval = time.Second
	const ttl = 3 * interval
	pods := map[string]*gatewaytest.Process{}
	for _, name := range []string{"pod-a", "pod-b", "pod-c"} {
		pods[name] = startGatewayWith(t, gatewaytest.Options{Name: name, Args: []string{
			"--redis", strings.Join(c.Addrs(), ","), "--pod-id", name,
			"--occupancy-interval", interval.String(), "--linger", "0",
			"--drain-delay", "0", "--drain-window", "0",
		}})
	}
	admins := []string{pods["pod-a"].Admin, pods["pod-b"].Admin, pods["pod-c"].Admin}
	room := redistest.Prefix(t)
	var onB []func()
	for range 2 {
		holdStream(t, pods["pod-a"].Public, room)
	}
	for range 3 {
		onB = append(onB, holdStream(t, pods["pod-b"].Public, room))
	}
	holdStream(t, pods["pod-c"].Public, room)
	// Every pod writes its records within one interval of a change; the slack is for
	// a loaded machine.
	awaitFleet(t, interval+10*time.Second, room, "pod-b=3 pod-a=2 pod-c=1", admins...)
	if _, sum, err := fleetAnswer(pods["pod-a"].Admin, room); err != nil || sum != 6 {
		t.Fatalf("fleet_members %d, %v; want 6", sum, err)
	}
	key := "room:{" + room + "}:pods"
	fields := strings.Fields(c.NodeForKey(t, key).MustDo(t, "HKEYS", key))
	slices.Sort(fields)
	if !slices.Equal(fields, []string{"pod-a", "pod-b", "pod-c"}) {
		t.Fatalf("HKEYS %s = %v", key, fields)
	}

	pods["pod-c"].Kill()
	killed := time.Now()
	// pod-c's record was written before the kill and lives ttl from then: it drops
	// out at most ttl after the kill. The slack covers the polling on a loaded machine.
	awaitFleet(t, ttl+2*time.Second, room, "pod-b=3 pod-a=2", admins[:2]...)
	t.Logf("the killed pod dropped out %s after SIGKILL (ttl %s)", time.Since(killed).Round(time.Millisecond), ttl)

	for _, stop := range onB {
		stop()
	}
	awaitFleet(t, 10*time.Second, room, "pod-a=2", admins[:2]...)
	if fields := c.NodeForKey(t, key).MustDo(t, "HKEYS", key); strings.TrimSpace(fields) != "pod-a" {
		t.Fatalf("HKEYS %s after pod-b's members left = %q, want pod-a alone", key, fields)
	}

	// A pod that drains and exits leaves no record behind.
	if err := pods["pod-a"].Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := c.NodeForKey(t, key).MustDo(t, "EXISTS", key); n != "0" {
		t.Fatalf("EXISTS %s after the last pod holding the room exited = %s, want 0", key, n)
	}
}
