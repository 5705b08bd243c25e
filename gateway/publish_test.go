package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestPublishErrors(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxBody: 1024}})
	url := p.public.URL + "/rooms/r/events"
	json := []string{"Content-Type", "application/json"}
	cases := []struct {
		name    string
		url     string
		body    string
		headers []string
		status  int
		code    string
	}{
		{"bad room", p.public.URL + "/rooms/a%7Bb/events", `1`, json, 400, "invalid_room"},
		{"too large", url, `"` + strings.Repeat("x", 1100) + `"`, json, 413, "payload_too_large"},
		{"no content type", url, `1`, nil, 415, "unsupported_media_type"},
		{"xml", url, `<a/>`, []string{"Content-Type", "application/xml"}, 415, "unsupported_media_type"},
		{"invalid json", url, `{"a":`, json, 400, "invalid_json"},
		{"two json values", url, `1 2`, json, 400, "invalid_json"},
		{"empty json", url, ``, json, 400, "invalid_body"},
		{"invalid utf-8 text", url, "\xff\xfe", []string{"Content-Type", "text/plain"}, 400, "invalid_body"},
		{"bad type header", url, `1`, append([]string{"Event-Type", "a b"}, json...), 400, "invalid_type"},
		{"reserved type", url + "?type=resync", `1`, json, 400, "invalid_type"},
		{"reserved reauth", url, `1`, append([]string{"Event-Type", "reauth"}, json...), 400, "invalid_type"},
		{"bad idempotency key", url, `1`, append([]string{"Idempotency-Key", "has space"}, json...), 400, "invalid_idempotency_key"},
		{"wrong method", p.public.URL + "/rooms/r/events", ``, nil, 405, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.status == 405 {
				method = http.MethodDelete
			}
			assertError(t, do(t, method, tc.url, tc.body, tc.headers...), tc.status, tc.code)
		})
	}
	// Nothing above was published.
	if res := do(t, http.MethodPost, url, `1`, json...); res.status != 201 || !strings.Contains(res.body, `"seq":1,`) {
		t.Fatalf("first valid publish: %d %s", res.status, res.body)
	}
}

func TestPublishCredential(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{PublishToken: "s3cret"}})
	url := p.public.URL + "/rooms/r/events"
	ct := []string{"Content-Type", "application/json"}
	assertError(t, do(t, http.MethodPost, url, `1`, ct...), 401, "unauthorized")
	assertError(t, do(t, http.MethodPost, url, `1`, append(ct, "Authorization", "Bearer wrong")...), 401, "unauthorized")
	assertError(t, do(t, http.MethodPost, url, `1`, append(ct, "Authorization", "Basic s3cret")...), 401, "unauthorized")
	if res := do(t, http.MethodPost, url, `1`, append(ct, "Authorization", "Bearer s3cret")...); res.status != 201 {
		t.Fatalf("with the token: %d %s", res.status, res.body)
	}
}

func TestPublishWithoutTokenIsLoopbackOnly(t *testing.T) {
	p := newPod(t, podConfig{})
	h := p.srv.Public()
	for _, tc := range []struct {
		remote string
		status int
	}{{"10.1.2.3:4567", 403}, {"[2001:db8::1]:80", 403}, {"127.0.0.1:5555", 201}, {"[::1]:5555", 201}} {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/rooms/r/events", strings.NewReader(`1`))
		req.RemoteAddr = tc.remote
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Fatalf("from %s: %d %s, want %d", tc.remote, rec.Code, rec.Body, tc.status)
		}
	}
}

func TestPublishAnswer(t *testing.T) {
	p := newPod(t, podConfig{})
	res := do(t, http.MethodPost, p.public.URL+"/rooms/r/events", `{"a":1}`, "Content-Type", "application/json")
	var out map[string]any
	if err := json.Unmarshal([]byte(res.body), &out); err != nil || res.status != 201 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	if out["room"] != "r" || out["seq"] != float64(1) || out["id"] != out["epoch"].(string)+":1" || len(out) != 4 {
		t.Fatalf("answer %v", out)
	}
}

func TestIdempotentPublish(t *testing.T) {
	p := newPod(t, podConfig{})
	s := p.subscribe(t, "r", "")
	s.nextAny()
	post := func(key string) string {
		res := do(t, http.MethodPost, p.public.URL+"/rooms/r/events", `{"order":7}`, "Content-Type", "application/json", "Idempotency-Key", key)
		if res.status != 201 {
			t.Fatalf("%d %s", res.status, res.body)
		}
		return res.body
	}
	first := post("order-7")
	if again := post("order-7"); again != first {
		t.Fatalf("retry answered %s, want %s", again, first)
	}
	other := post("order-8")
	if f := s.next(); f.seq(t) != 1 {
		t.Fatalf("first event %+v", f)
	}
	if f := s.next(); f.seq(t) != 2 || !strings.Contains(other, `"seq":2`) {
		t.Fatalf("the retry was published again: next event %+v", f)
	}
}

func TestBatchPublish(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxBody: 100, MaxBatchItems: 5}})
	url := p.public.URL + "/events"
	s := p.subscribe(t, "b", "")
	s.nextAny()
	body := `[{"room":"b","body":{"x":1}},{"room":"b{","body":1},{"room":"b","type":"resync","body":1},
		{"room":"b","type":"chat","body":"` + strings.Repeat("y", 120) + `"},{"room":"b","type":"chat","body":[2]}]`
	res := do(t, http.MethodPost, url, body, "Content-Type", "application/json")
	var out []map[string]any
	if err := json.Unmarshal([]byte(res.body), &out); err != nil || res.status != 200 || len(out) != 5 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	wantStatus := []float64{201, 400, 400, 413, 201}
	for i, w := range wantStatus {
		if out[i]["status"] != w {
			t.Fatalf("item %d: %v, want status %v", i, out[i], w)
		}
	}
	if out[0]["seq"] != float64(1) || out[4]["seq"] != float64(2) || out[1]["error"] != "invalid_room" {
		t.Fatalf("results %v", out)
	}
	if f := s.next(); f.seq(t) != 1 || f.event != "" {
		t.Fatalf("%+v", f)
	}
	if f := s.next(); f.seq(t) != 2 || f.event != "chat" {
		t.Fatalf("%+v", f)
	}

	ct := []string{"Content-Type", "application/json"}
	assertError(t, do(t, http.MethodPost, url, `{"room":"b"}`, ct...), 400, "invalid_json")
	assertError(t, do(t, http.MethodPost, url, `[]`, ct...), 400, "empty_batch")
	assertError(t, do(t, http.MethodPost, url, `[1,2,3,4,5,6]`, ct...), 413, "too_many_items")
	if res := do(t, http.MethodPost, url, `[1]`, ct...); res.status != 200 || !strings.Contains(res.body, `"error":"invalid_item"`) {
		t.Fatalf("non-object item: %d %s", res.status, res.body)
	}
	assertError(t, do(t, http.MethodPost, url, `[]`, "Content-Type", "text/plain"), 415, "unsupported_media_type")
}

func TestOperationalRoutes(t *testing.T) {
	p := newPod(t, podConfig{})
	if res := do(t, http.MethodGet, p.public.URL+"/healthz", ""); res.status != 200 {
		t.Fatalf("healthz %d", res.status)
	}
	if res := do(t, http.MethodGet, p.public.URL+"/readyz", ""); res.status != 200 {
		t.Fatalf("readyz %d", res.status)
	}
	s := p.subscribe(t, "r", "")
	s.nextAny()
	p.publish(t, "r", `1`)
	s.next()
	// The server counts a delivery once its write returned, which the client may
	// see before.
	var st map[string]any
	replaytest.Eventually(t, 10*time.Second, "the delivery counted", func() bool {
		st = statsOf(t, p)
		return st["delivered"] == float64(1)
	})
	if st["state"] != "ready" || st["connections"] != float64(1) || st["rooms"] != float64(1) ||
		st["subscriptions"] != float64(1) || st["published"] != float64(1) || st["delivered"] != float64(1) {
		t.Fatalf("stats %v", st)
	}
	metrics := p.metrics(t)
	for _, want := range []string{"roomcast_streams_open", "roomcast_events_published_total", "roomcast_events_delivered_total", `roomcast_streams_opened_total{resumed="false"}`} {
		if metrics[want] != 1 {
			t.Errorf("metrics: %s = %v, want 1", want, metrics[want])
		}
	}
	for _, path := range []string{"/metrics", "/admin/stats", "/debug/pprof/"} {
		if res := do(t, http.MethodGet, p.public.URL+path, ""); res.status != 404 {
			t.Errorf("public listener serves %s: %d", path, res.status)
		}
	}
	if res := do(t, http.MethodGet, p.public.URL+"/admin/drain", ""); res.status != 404 {
		t.Errorf("public listener serves /admin/drain: %d", res.status)
	}
}

func TestPublishWhenTheLogIsFullOrGone(t *testing.T) {
	p := newPod(t, podConfig{mem: replay.MemoryConfig{MaxRooms: 1}})
	p.publish(t, "first", `1`)
	res := do(t, http.MethodPost, p.public.URL+"/rooms/second/events", `1`, "Content-Type", "application/json")
	assertError(t, res, http.StatusServiceUnavailable, "unavailable")
	if res.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	p.publish(t, "first", `2`) // the room it holds keeps working

	if err := p.log.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	res = do(t, http.MethodPost, p.public.URL+"/rooms/first/events", `3`, "Content-Type", "application/json")
	assertError(t, res, http.StatusServiceUnavailable, "unavailable")
	if res.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}

func TestAdminDrain(t *testing.T) {
	p := newPod(t, podConfig{})
	res := do(t, http.MethodPost, p.admin.URL+"/admin/drain", "")
	// With no streams and no delay the drain may be over before the answer is
	// written: either state says it began.
	if res.status != http.StatusAccepted ||
		!strings.Contains(res.body, `"state":"draining"`) && !strings.Contains(res.body, `"state":"stopped"`) {
		t.Fatalf("drain: %d %s", res.status, res.body)
	}
	<-p.drain.Done()
	if st := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "").body; !strings.Contains(st, `"state":"stopped"`) {
		t.Fatalf("stats after the drain: %s", st)
	}
	if res := do(t, http.MethodGet, p.admin.URL+"/admin/drain", ""); res.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET /admin/drain: %d", res.status)
	}
}
