package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// scriptedStream serves one scripted answer per connection, in order, and records
// each connection's Last-Event-ID. Past the script it serves an open stream that
// sends nothing until the client leaves.
type scriptedStream struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	lastIDs []string
}

func (s *scriptedStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.lastIDs)
	s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
	s.mu.Unlock()
	if n < len(s.answers) {
		s.answers[n](w)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

func (s *scriptedStream) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lastIDs...)
}

// streamOf answers 200 with body as the event stream, then ends it cleanly.
func streamOf(body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, body)
	}
}

func statusOf(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"code_%d","message":"scripted"}`, code)
	}
}

// fakeTiming makes a follower's waits instant and records them; after stopAfter
// waits it ends the follow.
func fakeTiming(f *follower, stopAfter int, cancel context.CancelFunc) *[]time.Duration {
	var waits []time.Duration
	f.min, f.max, f.stayUp = 100*time.Millisecond, 800*time.Millisecond, time.Hour
	f.jitter = func(d time.Duration) time.Duration { return d }
	f.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		if len(waits) >= stopAfter {
			cancel()
			return context.Canceled
		}
		return ctx.Err()
	}
	return &waits
}

// TestFollowBackoffResetsAfterSuccess: failed connections double the wait up to the
// cap, a clean end without a frame counts as failed, a connection that delivered an
// event starts the backoff over, the server's retry: is waited when longer, and every
// reconnect resumes from the last id seen.
func TestFollowBackoffResetsAfterSuccess(t *testing.T) {
	s := &scriptedStream{answers: []func(http.ResponseWriter){
		statusOf(http.StatusServiceUnavailable),                   // wait 100
		statusOf(http.StatusBadGateway),                           // wait 200
		streamOf(": hb\n\n"),                                      // clean end, nothing delivered: wait 400
		statusOf(http.StatusServiceUnavailable),                   // wait 800
		statusOf(http.StatusServiceUnavailable),                   // wait 800 (the cap)
		streamOf("id: e:1\ndata: {\"seq\":1}\n\n"),                // delivered: wait 100
		statusOf(http.StatusServiceUnavailable),                   // wait 100 (the backoff started over)
		streamOf("retry: 1500\n\nid: e:2\ndata: {\"seq\":2}\n\n"), // delivered, retry 1500: wait 1500
		streamOf("id: e:2\nevent: anchor\ndata: {\"seq\":2}\n\n"), // an anchor only: worked, no event; retry 1500 still holds
		streamOf("retry: 50\n\nid: e:3\ndata: {\"seq\":3}\n\n"),   // retry 50 < backoff 100: wait 100
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	f := &follower{url: srv.URL, handle: func(ev streamEvent) error {
		got = append(got, ev.ID+" "+ev.Type+" "+string(ev.Data))
		return nil
	}}
	waits := fakeTiming(f, 10, cancel)
	if err := f.run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 800 * ms, 100 * ms, 100 * ms, 1500 * ms, 1500 * ms, 100 * ms}
	if fmt.Sprint(*waits) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v", *waits, want)
	}
	wantEvents := []string{`e:1 message {"seq":1}`, `e:2 message {"seq":2}`, `e:3 message {"seq":3}`}
	if fmt.Sprint(got) != fmt.Sprint(wantEvents) {
		t.Errorf("events = %q, want %q", got, wantEvents)
	}
	ids := s.ids()
	wantIDs := []string{"", "", "", "", "", "", "e:1", "e:1", "e:2", "e:2"}
	if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
		t.Errorf("Last-Event-IDs = %q, want %q", ids, wantIDs)
	}
}

// TestFollowStaysUpCountsAsSuccess: a connection that stayed up for stayUp worked
// even if it delivered nothing, so the backoff starts over.
func TestFollowStaysUpCountsAsSuccess(t *testing.T) {
	s := &scriptedStream{answers: []func(http.ResponseWriter){
		statusOf(http.StatusServiceUnavailable), // wait 100
		statusOf(http.StatusServiceUnavailable), // wait 200
		streamOf(": hb\n\n"),                    // stayed up (the fake clock says): wait 100
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &follower{url: srv.URL, handle: func(streamEvent) error { return nil }}
	waits := fakeTiming(f, 3, cancel)
	f.stayUp = time.Minute
	var clock time.Time
	calls := 0
	f.now = func() time.Time {
		// Each connection reads the clock at its start and end; the third one
		// lasts a minute.
		calls++
		if calls == 6 {
			clock = clock.Add(time.Minute)
		}
		return clock
	}
	if err := f.run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	ms := time.Millisecond
	if want := []time.Duration{100 * ms, 200 * ms, 100 * ms}; fmt.Sprint(*waits) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v", *waits, want)
	}
}

// TestFollowEnds: what ends a follow for good, and with what.
func TestFollowEnds(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter)
		url    string
		check  func(error) bool
	}{
		{"401", statusOf(http.StatusUnauthorized), "", func(err error) bool {
			var se *serverError
			return errors.As(err, &se) && se.Status == 401 && se.Code == "code_401"
		}},
		{"404", statusOf(http.StatusNotFound), "", func(err error) bool {
			var se *serverError
			return errors.As(err, &se) && se.Status == 404
		}},
		{"not an event stream", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html>")
		}, "", func(err error) bool {
			var ns *notStreamError
			return errors.As(err, &ns)
		}},
		{"unreachable", nil, deadURL, func(err error) bool {
			return exitCode(err) == exitUnreachable
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.url
			if u == "" {
				srv := httptest.NewServer(&scriptedStream{answers: []func(http.ResponseWriter){tc.answer}})
				defer srv.Close()
				u = srv.URL
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := &follower{url: u, handle: func(streamEvent) error { return nil }}
			waits := fakeTiming(f, 1, cancel)
			err := f.run(ctx)
			if !tc.check(err) {
				t.Errorf("run = %v (%T)", err, err)
			}
			if len(*waits) != 0 {
				t.Errorf("waited %v before giving up", *waits)
			}
		})
	}
}

// TestFollowHandlerStops: the handler's errStop ends the follow with nil at once,
// its other errors end it with that error.
func TestFollowHandlerStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop error
		want error
	}{{"errStop", errStop, nil}, {"error", errors.New("enough"), nil}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&scriptedStream{answers: []func(http.ResponseWriter){
				streamOf("id: e:1\ndata: 1\n\nid: e:2\ndata: 2\n\n"),
			}})
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := 0
			f := &follower{url: srv.URL, handle: func(streamEvent) error { n++; return tc.stop }}
			fakeTiming(f, 1, cancel)
			err := f.run(ctx)
			if tc.stop == errStop && err != nil || tc.stop != errStop && err != tc.stop {
				t.Errorf("run = %v", err)
			}
			if n != 1 {
				t.Errorf("handler called %d times after stopping", n)
			}
		})
	}
}

// TestFollowIdleTimeout: a stream that sends nothing, not even a heartbeat, within
// the idle timeout is taken as dead and followed again from the last id.
func TestFollowIdleTimeout(t *testing.T) {
	silent := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: e:1\ndata: 1\n\n")
		http.NewResponseController(w).Flush()
		// Then silence, until the client gives up on the connection; the
		// server's handler returns when the client cancels its request.
	}
	s := &scriptedStream{}
	s.answers = []func(http.ResponseWriter){silent, streamOf("id: e:2\ndata: 2\n\n")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	var causes []error
	f := &follower{url: srv.URL, idle: 200 * time.Millisecond, handle: func(ev streamEvent) error {
		got = append(got, ev.ID)
		if len(got) == 2 {
			return errStop
		}
		return nil
	}}
	fakeTiming(f, 5, cancel)
	f.waiting = func(_ time.Duration, cause error) { causes = append(causes, cause) }
	if err := f.run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	if fmt.Sprint(got) != "[e:1 e:2]" || len(causes) != 1 || !errors.Is(causes[0], errIdle) {
		t.Errorf("events %v, reconnect causes %v; want [e:1 e:2] after one idle timeout", got, causes)
	}
	if ids := s.ids(); fmt.Sprint(ids) != "[ e:1]" {
		t.Errorf("Last-Event-IDs %q", ids)
	}
}
