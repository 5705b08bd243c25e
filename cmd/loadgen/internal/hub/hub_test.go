package hub

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

func TestPublishAnswers(t *testing.T) {
	h := New()
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	tests := []struct {
		name   string
		path   string
		body   string
		status int
		want   string
	}{
		{name: "first", path: "/rooms/a/events", body: `{"x": 1}`, status: 201, want: `{"room":"a","epoch":"hub","seq":1,"id":"hub:1"}`},
		{name: "dense seq", path: "/rooms/a/events", body: `{}`, status: 201, want: `{"room":"a","epoch":"hub","seq":2,"id":"hub:2"}`},
		{name: "other room", path: "/rooms/b.c~d/events", body: `1`, status: 201, want: `{"room":"b.c~d","epoch":"hub","seq":1,"id":"hub:1"}`},
		{name: "typed", path: "/rooms/a/events?type=note", body: `1`, status: 201, want: `{"room":"a","epoch":"hub","seq":3,"id":"hub:3"}`},
		{name: "batch", path: "/events", body: `[{"room":"a","body":{}},{"room":"b.c~d","type":"x","body":[1]}]`, status: 201,
			want: `[{"room":"a","epoch":"hub","seq":4,"id":"hub:4"},{"room":"b.c~d","epoch":"hub","seq":2,"id":"hub:2"}]`},
		{name: "bad json", path: "/rooms/a/events", body: `{`, status: 400},
		{name: "bad room", path: "/rooms/a%7Bb%7D/events", body: `1`, status: 400},
		{name: "bad type", path: "/rooms/a/events?type=a%0Ab", body: `1`, status: 400},
		{name: "bad batch item", path: "/events", body: `[{"room":"","body":1}]`, status: 400},
		{name: "too large", path: "/rooms/a/events", body: `"` + strings.Repeat("x", maxBody) + `"`, status: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got json.RawMessage
			_ = json.NewDecoder(resp.Body).Decode(&got)
			if resp.StatusCode != tt.status || (tt.want != "" && string(got) != tt.want) {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, got, tt.status, tt.want)
			}
		})
	}
}

func TestStreamFrames(t *testing.T) {
	h := New()
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	resp, err := http.Get(srv.URL + "/rooms/r/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream; charset=utf-8" {
		t.Fatalf("%d %q", resp.StatusCode, ct)
	}
	// The 200 arrives after the member joined: this publish must reach the stream.
	pub, err := http.Post(srv.URL+"/rooms/r/events?type=note", "application/json", strings.NewReader("{\n \"a\": 1\n}"))
	if err != nil {
		t.Fatal(err)
	}
	pub.Body.Close()
	br := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 5 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
	want := []string{"retry: 3000", "", "id: hub:1", "event: note", `data: {"room":"r","epoch":"hub","seq":1,"ts":`}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) || (i < 4 && lines[i] != want[i]) {
			t.Fatalf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
	if !strings.HasSuffix(lines[4], `,"type":"note","body":{"a":1}}`) {
		t.Errorf("data line %q: body not compacted into the envelope", lines[4])
	}
}

func TestSlowSubscriberDropped(t *testing.T) {
	h := New()
	rm, ch := h.room("r"), make(chan []byte, queueLen)
	rm.members[ch] = struct{}{}
	for range queueLen + 1 {
		h.publish("r", "", []byte("1"))
	}
	if _, ok := rm.members[ch]; ok {
		t.Fatal("a full subscriber is still a member")
	}
	n := 0
	for range ch { // closed after the queued frames
		n++
	}
	if n != queueLen {
		t.Errorf("%d frames queued before the drop, want %d", n, queueLen)
	}
}

// TestMetricsCountsStreams: GET /metrics is a Prometheus text exposition whose
// go_goroutines grows with the open streams (a goroutine each).
func TestMetricsCountsStreams(t *testing.T) {
	h := New()
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	goroutines := func() float64 {
		t.Helper()
		m, err := gatewaytest.Scrape(t.Context(), srv.Client(), srv.URL+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		v, ok := m["go_goroutines"]
		if !ok || v < 1 {
			t.Fatalf("go_goroutines = %v (present %v): %v", v, ok, m)
		}
		return v
	}
	before := goroutines()
	const streams = 5
	for range streams {
		resp, err := http.Get(srv.URL + "/rooms/r/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// The retry: line arrives once the stream's goroutine runs.
		if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "retry: 3000\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
	}
	if after := goroutines(); after < before+streams {
		t.Errorf("go_goroutines %v with %d streams open, %v before: want at least one more per stream", after, streams, before)
	}
}
