package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// lossyServer is a one-room server that acknowledges every publish with the next
// seq but streams for each seq only the frame frameOf gives ("": none), so the load
// generator must find the rest missing.
func lossyServer(t *testing.T, frameOf func(seq uint64) string) *httptest.Server {
	t.Helper()
	var (
		mu    sync.Mutex
		seq   uint64
		conns []chan uint64
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			mu.Lock()
			seq++
			n := seq
			for _, c := range conns {
				select {
				case c <- n:
				default: // a test subscriber never falls this far behind
				}
			}
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"room":"r","epoch":"e","seq":%d,"id":"e:%d"}`, n, n)
			return
		}
		c := make(chan uint64, 4096)
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = io.WriteString(w, "retry: 5\n\n")
		_ = http.NewResponseController(w).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case n := <-c:
				if f := frameOf(n); f != "" {
					_, _ = io.WriteString(w, f)
					_ = http.NewResponseController(w).Flush()
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSoakExitsOnLoss(t *testing.T) {
	tests := []struct {
		name            string
		deliver         func(uint64) bool
		gaps, tail      bool
		wantUndelivered bool
	}{
		{name: "a gap", deliver: func(n uint64) bool { return n != 3 }, gaps: true},
		{name: "the tail never arrives", deliver: func(n uint64) bool { return n <= 5 }, wantUndelivered: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := lossyServer(t, func(n uint64) string {
				if !tt.deliver(n) {
					return ""
				}
				return frame("e", n)
			})
			code, rep, _, stderr := runMain(t, "-scenario", "soak", "-url", srv.URL, "-subs", "1", "-rooms", "1",
				"-rate", "100", "-warmup", "0s", "-duration", "500ms", "-settle", "300ms", "-report-every", "100ms",
				"-progress", "0", "-bar", "off")
			if code != exitLossy || !rep.Lossy() || rep.Lost == 0 {
				t.Fatalf("exit %d, lost %d, lossy %v; want exit %d and a loss\n%s", code, rep.Lost, rep.Lossy(), exitLossy, stderr)
			}
			if tt.gaps && rep.Gaps == 0 {
				t.Errorf("gaps = 0, want the missing seq 3 counted")
			}
			if tt.wantUndelivered && (rep.Undelivered == 0 || rep.Gaps != 0) {
				t.Errorf("undelivered %d, gaps %d; want the tail counted as undelivered, no gap", rep.Undelivered, rep.Gaps)
			}
			if !strings.Contains(stderr, "loss detected") {
				t.Errorf("stderr lacks the loss line:\n%s", stderr)
			}
		})
	}
}

// TestExpiredMarkersAreNotLoss: a server that sends every third seq as its expired
// marker (event expired, the position as data, no body) loses nothing: the run
// exits 0, counts the markers as deliveries and reports them as expired.
func TestExpiredMarkersAreNotLoss(t *testing.T) {
	srv := lossyServer(t, func(n uint64) string {
		if n%3 != 0 {
			return frame("e", n)
		}
		return fmt.Sprintf("id: e:%d\nevent: expired\ndata: {\"room\":\"r\",\"epoch\":\"e\",\"seq\":%d}\n\n", n, n)
	})
	code, rep, raw, stderr := runMain(t, "-url", srv.URL, "-subs", "1", "-rooms", "1", "-rate", "100",
		"-warmup", "0s", "-duration", "300ms", "-settle", "300ms", "-progress", "0", "-bar", "off", "-ttl", "1ms")
	if code != exitOK || rep.Lossy() || rep.Lost != 0 || rep.Expired == 0 {
		t.Fatalf("exit %d, lost %d, lossy %v, expired %d; want exit 0, no loss and the markers counted\n%s",
			code, rep.Lost, rep.Lossy(), rep.Expired, stderr)
	}
	if _, ok := raw["expired"]; !ok || rep.Deliveries < rep.Expired*3-3 {
		t.Errorf("JSON report: expired %v, deliveries %d", raw["expired"], rep.Deliveries)
	}
}

func TestRunDrainCmd(t *testing.T) {
	cfg := &Config{URLs: []string{"http://a", "http://b"}, AdminURLs: []string{"http://a:9"}}
	tests := []struct {
		name, cmd string
		pod       int
		wantErr   string
	}{
		{name: "the pod is in the environment", pod: 1,
			cmd: `test "$ROOMCAST_POD_INDEX" = 1 && test "$ROOMCAST_POD_URL" = http://b && test -z "$ROOMCAST_POD_ADMIN_URL"`},
		{name: "the admin URL when there is one", pod: 0, cmd: `test "$ROOMCAST_POD_ADMIN_URL" = http://a:9`},
		{name: "a failure carries the output", pod: 0, cmd: `echo "no such pod $ROOMCAST_POD_URL"; exit 3`,
			wantErr: "no such pod http://a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *cfg
			c.DrainCmd = tt.cmd
			err := runDrainCmd(t.Context(), &c, tt.pod)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("runDrainCmd = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}
