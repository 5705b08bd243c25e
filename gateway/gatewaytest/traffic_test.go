package gatewaytest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// errorsOf stands in for a test and keeps what it reports.
type errorsOf struct {
	testing.TB
	mu  sync.Mutex
	got []string
}

func (e *errorsOf) Helper() {}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf(format, args...))
}

func (e *errorsOf) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, g := range e.got {
		if strings.Contains(g, s) {
			return true
		}
	}
	return false
}

// TestLedgerCheck: a subscriber that got every acknowledged seq once passes; a
// missing seq, a duplicate, a seq never acknowledged and an unexpected resync are
// each reported, and a resync allowed to skip seqs explains them.
func TestLedgerCheck(t *testing.T) {
	l := NewLedger()
	for seq := uint64(1); seq <= 5; seq++ {
		l.Ack("r", seq)
	}
	feed := func(a *Audit, frames ...string) *Audit {
		for _, f := range frames {
			event, id, _ := strings.Cut(f, " ")
			a.Frame(id, event)
		}
		return a
	}
	tests := []struct {
		name   string
		audit  *Audit
		want   string // "": no error
		counts func(Loss) bool
	}{
		{"every seq once", feed(NewAudit("r", 1, false), "message e:1", "message e:2", "message e:3", "message e:4", "message e:5"), "",
			func(r Loss) bool { return r.Missing == 0 && r.Duplicate == 0 }},
		{"a seq missing", feed(NewAudit("r", 1, false), "message e:1", "message e:2", "message e:4", "message e:5"), "seq 3 never delivered",
			func(r Loss) bool { return r.Missing == 1 }},
		{"a tail missing", feed(NewAudit("r", 1, false), "message e:1", "message e:2", "message e:3"), "seq 5 never delivered",
			func(r Loss) bool { return r.Missing == 2 }},
		{"a duplicate", feed(NewAudit("r", 1, false), "message e:1", "message e:2", "message e:2", "message e:3", "message e:4", "message e:5"), "seq 2 delivered 2 times",
			func(r Loss) bool { return r.Duplicate == 1 }},
		{"never acknowledged", feed(NewAudit("r", 1, false), "message e:1", "message e:2", "message e:3", "message e:4", "message e:5", "message e:6"), "never acknowledged",
			func(r Loss) bool { return r.Phantom == 1 }},
		{"a resync not allowed", feed(NewAudit("r", 1, false), "message e:1", "resync e:3", "message e:4", "message e:5"), "resync to e:3",
			func(r Loss) bool { return r.Resyncs == 1 }},
		{"a resync allowed", feed(NewAudit("r", 1, true), "message e:1", "resync e:3", "message e:4", "message e:5"), "",
			func(r Loss) bool { return r.Explained == 2 && r.Missing == 0 }},
		{"a resync to another epoch", feed(NewAudit("r", 1, true), "message e:1", "resync f:3", "message f:4", "message f:5"), "another epoch", nil},
		{"a bad id", feed(NewAudit("r", 1, false), "message nope:x"), `bad id "nope:x"`, nil},
		{"an expired marker", feed(NewAudit("r", 1, false), "message e:1", "expired e:2", "message e:3", "expired e:4", "message e:5"), "",
			func(r Loss) bool { return r.Missing == 0 && r.Expired == 2 && r.Duplicate == 0 }},
		{"an expired marker twice", feed(NewAudit("r", 1, false), "message e:1", "expired e:2", "expired e:2", "message e:3", "message e:4", "message e:5"), "seq 2 delivered 2 times",
			func(r Loss) bool { return r.Expired == 1 && r.Duplicate == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &errorsOf{TB: t}
			rep := l.Check(rec, []*Audit{tt.audit})
			if tt.want == "" && len(rec.got) > 0 {
				t.Errorf("reported %q, want nothing", rec.got)
			}
			if tt.want != "" && !rec.has(tt.want) {
				t.Errorf("reported %q, want %q", rec.got, tt.want)
			}
			if tt.counts != nil && !tt.counts(rep) {
				t.Errorf("totals %+v", rep)
			}
		})
	}
}

// TestLedgerPublish: publishers retry a 503 with the same key until acknowledged,
// record the seq, and report a 4xx as failed for good; Settle reports a subscriber
// that never caught up.
func TestLedgerPublish(t *testing.T) {
	var (
		mu   sync.Mutex
		seqs = map[string]uint64{} // key → seq
		next uint64
		hits int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		if hits++; hits%3 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if strings.Contains(r.URL.Path, "/rooms/bad/") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if seqs[key] == 0 {
			next++
			seqs[key] = next
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"room":"r","epoch":"e","seq":%d,"id":"e:%d"}`, seqs[key], seqs[key])
	}))
	defer srv.Close()

	l := NewLedger()
	stop := make(chan struct{})
	l.Publish(Publishers{Targets: []string{srv.URL}, Rooms: []string{"r", "bad"}, Rate: 200, Workers: 2, Key: "k", MustAck: true}, stop)
	time.Sleep(200 * time.Millisecond) // a duration of traffic, not a sync point
	close(stop)
	rec := &errorsOf{TB: t}
	l.Settle(rec, []*Audit{NewAudit("r", 1, false)}, 0)
	if !rec.has("publish failed for good: bad") {
		t.Errorf("reported %q, want the 400s failed for good", rec.got)
	}
	if !rec.has("subscriber of r stopped at") {
		t.Errorf("reported %q, want the subscriber that saw nothing behind", rec.got)
	}
	if l.Acked() == 0 || l.Top("r") != uint64(l.Acked()) {
		t.Errorf("acknowledged %d, top %d: want every publish to r acknowledged once, dense", l.Acked(), l.Top("r"))
	}
	if l.retries == 0 {
		t.Error("no retry of a 503")
	}
}
