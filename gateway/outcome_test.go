package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestFleetPublishOutcomeUnknown: a publish handed to Redis that got no answer in
// time is 503 outcome_unknown, pointing to Idempotency-Key, and a retry with the key
// publishes it once; a publish Redis never received is 503 unavailable, "not
// published".
func TestFleetPublishOutcomeUnknown(t *testing.T) {
	s := redistest.Standalone(t) // its own server: the test pauses and stops it
	p := newFleetPod(t, s, replay.RedisConfig{Timeout: 300 * time.Millisecond}, podConfig{})
	room := redistest.Prefix(t)
	url := p.public.URL + "/rooms/" + room + "/events"
	p.publish(t, room, `{"i":1}`)

	s.MustDo(t, "CLIENT", "PAUSE", "2000", "WRITE")
	paused := time.Now()
	keyed := []string{"Content-Type", "application/json", "Idempotency-Key", "k2"}
	res := do(t, http.MethodPost, url, `{"i":2}`, keyed...)
	assertError(t, res, http.StatusServiceUnavailable, "outcome_unknown")
	if res.header.Get("Retry-After") == "" || !strings.Contains(res.body, "Idempotency-Key") || !strings.Contains(res.body, "may have been published") {
		t.Fatalf("outcome unknown: %v %s", res.header, res.body)
	}
	batch := do(t, http.MethodPost, p.public.URL+"/events", `[{"room":"`+room+`","body":{"i":3}}]`, "Content-Type", "application/json")
	var items []struct {
		Status         int
		Error, Message string
	}
	if err := json.Unmarshal([]byte(batch.body), &items); err != nil || batch.status != http.StatusOK || len(items) != 1 ||
		items[0].Status != http.StatusServiceUnavailable || items[0].Error != "outcome_unknown" || !strings.Contains(items[0].Message, "Idempotency-Key") {
		t.Fatalf("batch while paused: %d %s", batch.status, batch.body)
	}
	if time.Since(paused) > 1800*time.Millisecond {
		t.Fatal("the publishes outlasted the pause; the test proves nothing")
	}
	// Retrying with the same key, as the answer says, publishes it at most once.
	var id string
	replaytest.Eventually(t, 10*time.Second, "a retry with the key is published", func() bool {
		res := do(t, http.MethodPost, url, `{"i":2}`, keyed...)
		var out struct{ ID string }
		_ = json.Unmarshal([]byte(res.body), &out)
		id = out.ID
		return res.status == http.StatusCreated
	})
	if res := do(t, http.MethodPost, url, `{"i":2}`, keyed...); res.status != http.StatusCreated || !strings.Contains(res.body, `"id":"`+id+`"`) {
		t.Fatalf("second retry: %d %s, want id %s", res.status, res.body, id)
	}
	// The paused batch's {"i":3} may have been published too, before or after it
	// (its outcome was unknown): {"i":2} is there once, as the retries' id.
	evs, _, err := p.log.Since(context.Background(), room, replay.Position{}, 10)
	n, asID := 0, false
	for _, ev := range evs {
		if string(ev.Body) == `{"i":2}` {
			n++
			asID = ev.ID() == id
		}
	}
	if err != nil || n != 1 || !asID {
		t.Fatalf("log: %+v %v; want {\"i\":2} once, as %s", evs, err, id)
	}

	// A Redis that is down never receives the publish: not published. (The first
	// publish on each connection the server closed may read EOF after writing:
	// unknown, as for a server that took the command and died.)
	_, _ = s.Do("SHUTDOWN", "NOSAVE")
	for i := 0; ; i++ {
		res = do(t, http.MethodPost, url, `{"i":4}`, "Content-Type", "application/json")
		if strings.Contains(res.body, "outcome_unknown") && i < 20 {
			continue
		}
		assertError(t, res, http.StatusServiceUnavailable, "unavailable")
		if res.header.Get("Retry-After") == "" || !strings.Contains(res.body, "not published") {
			t.Fatalf("redis down: %v %s", res.header, res.body)
		}
		break
	}
}
