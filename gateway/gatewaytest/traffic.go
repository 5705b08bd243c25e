package gatewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/polltest"
	"github.com/roomcast/roomcast/replay/wire"
)

// The traffic and loss harness of tests that put a fleet through a failure (a
// failover, a slot move, a drain, a rollout): publishers that retry with an
// Idempotency-Key until acknowledged, recording every acknowledged seq in a Ledger;
// subscribers that feed what they receive into an Audit each; and the check of every
// Audit against the Ledger, which owes each subscriber each acknowledged seq of its
// room exactly once, unless a resync it was sent declared it lost.

// Ledger holds what publishers had acknowledged, per room, and the publishes that
// went wrong. It is safe for concurrent use.
type Ledger struct {
	mu        sync.Mutex
	acked     map[string]map[uint64]bool // room → acknowledged seqs
	failed    []string                   // publishes never acknowledged, and why
	abandoned map[string]int             // room → publishes given up unanswered at a stop
	retries   int

	wg sync.WaitGroup // publishers
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{acked: map[string]map[uint64]bool{}, abandoned: map[string]int{}}
}

// Ack records an acknowledged publish.
func (l *Ledger) Ack(room string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acked[room] == nil {
		l.acked[room] = map[uint64]bool{}
	}
	l.acked[room][seq] = true
}

// Top returns the newest acknowledged seq of room (0: none).
func (l *Ledger) Top(room string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var top uint64
	for seq := range l.acked[room] {
		top = max(top, seq)
	}
	return top
}

// Acked returns how many publishes were acknowledged, over every room.
func (l *Ledger) Acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, seqs := range l.acked {
		n += len(seqs)
	}
	return n
}

// Publishers describes the publishers Ledger.Publish runs.
type Publishers struct {
	// Targets are the base URLs published to: worker w's i-th publish goes to
	// Targets[(i+w) % len(Targets)].
	Targets []string
	// Rooms are published to in turn: worker w's i-th publish goes to
	// Rooms[(i*Workers+w) % len(Rooms)].
	Rooms []string
	Rate  int // events per second over every room; at least 1
	// Workers publish concurrently, each at Rate/Workers; 0 means 8.
	Workers int
	// Key prefixes every Idempotency-Key, so that runs against one fleet differ.
	Key    string
	Client *http.Client // nil: http.DefaultClient
	// MustAck keeps a publish begun before the stop retrying until it is
	// acknowledged. Without it, a stop abandons the publishes still retrying (the
	// ledger counts them: each may have landed unanswered).
	MustAck bool
	// GiveUp bounds the retries of one publish; a publish not acknowledged by then
	// failed for good. 0 means 30s.
	GiveUp time.Duration
	// Pad adds a string of this many bytes to every body (as "pad"), for traffic
	// measured in bytes rather than events.
	Pad int
}

// Publish starts p's workers, which publish until stop is closed; Wait waits for
// them. Every publish sends {"k":<key>} (and its Pad) with its key as Idempotency-Key, and retries
// network errors and 5xx answers with the same key, backing off from 50ms to
// 500ms. Any other answer but 201 fails the publish for good.
func (l *Ledger) Publish(p Publishers, stop <-chan struct{}) {
	workers := p.Workers
	if workers <= 0 {
		workers = 8
	}
	if p.Rate < 1 || len(p.Targets) == 0 || len(p.Rooms) == 0 {
		panic("gatewaytest: Publishers needs a Rate, Targets and Rooms")
	}
	if p.Client == nil {
		p.Client = http.DefaultClient
	}
	if p.GiveUp <= 0 {
		p.GiveUp = 30 * time.Second
	}
	tick := time.Second * time.Duration(workers) / time.Duration(p.Rate)
	for w := 0; w < workers; w++ {
		l.wg.Go(func() {
			t := time.NewTicker(tick)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				room := p.Rooms[(i*workers+w)%len(p.Rooms)]
				target := p.Targets[(i+w)%len(p.Targets)]
				l.publishOne(p, target, room, fmt.Sprintf("%s-w%d-%d", p.Key, w, i), stop)
			}
		})
	}
}

// publishOne retries one publish with one key until it is acknowledged, fails for
// good, or (without MustAck) stop abandons it.
func (l *Ledger) publishOne(p Publishers, target, room, key string, stop <-chan struct{}) {
	giveUp := time.Now().Add(p.GiveUp)
	pad := strings.Repeat("x", p.Pad)
	if p.MustAck {
		stop = nil
	}
	for attempt := 0; ; attempt++ {
		status, seq, err := publishOnce(p.Client, target, room, key, pad)
		switch {
		case err == nil && status == http.StatusCreated && seq > 0:
			l.Ack(room, seq)
			return
		case err == nil && status < 500:
			l.fail(fmt.Sprintf("%s %s: status %d", room, key, status))
			return
		case time.Now().After(giveUp):
			l.fail(fmt.Sprintf("%s %s: not acknowledged within %s (last: %d %v)", room, key, p.GiveUp, status, err))
			return
		}
		l.mu.Lock()
		l.retries++
		l.mu.Unlock()
		pause := time.NewTimer(time.Duration(min(attempt+1, 10)) * 50 * time.Millisecond)
		select {
		case <-stop:
			pause.Stop()
			l.mu.Lock()
			l.abandoned[room]++
			l.mu.Unlock()
			return
		case <-pause.C:
		}
	}
}

// publishOnce posts one event and returns the answer's status and, on a 201, its
// seq (0 when the answer does not decode).
func publishOnce(hc *http.Client, target, room, key, pad string) (int, uint64, error) {
	body := `{"k":"` + key + `"}`
	if pad != "" {
		body = `{"k":"` + key + `","pad":"` + pad + `"}`
	}
	req, err := http.NewRequest(http.MethodPost, target+"/rooms/"+room+"/events", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	var out struct{ Seq uint64 }
	if res.StatusCode == http.StatusCreated && json.NewDecoder(res.Body).Decode(&out) != nil {
		out.Seq = 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, out.Seq, nil
}

func (l *Ledger) fail(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, what)
}

// Wait waits for the publishers to return (after their stop).
func (l *Ledger) Wait() { l.wg.Wait() }

// Audit is one subscriber's record of one room across its reconnects: a Tracker,
// the deliveries of each seq, the resyncs and the ranges they declared lost, the
// problems seen, and a trace of the latest frames and reconnects for failure
// messages. It is safe for concurrent use.
type Audit struct {
	room string

	mu          sync.Mutex
	allowResync bool
	track       Tracker
	last        wire.Position
	got         map[uint64]int // seq → deliveries, within the current epoch
	lost        []SeqRange     // what resyncs declared lost
	resyncs     int
	problems    []string // the first maxProblems
	more        int      // problems past maxProblems
	trace       []string // the latest entries, at most maxTrace
}

// Bounds of what an Audit keeps for failure messages.
const (
	maxProblems = 20
	maxTrace    = 64
)

// NewAudit returns the audit of a subscriber of room whose first event must carry
// seq first (0: any). With allowResync, a resync that moves forward within the
// room's epoch declares the seqs it skips lost, and only a resync to another epoch
// is a problem; without it, every resync is one.
func NewAudit(room string, first uint64, allowResync bool) *Audit {
	a := &Audit{room: room, got: map[uint64]int{}, allowResync: allowResync}
	a.track.ExpectFirst(first)
	a.track.ResyncIsHead()
	return a
}

// Room returns the audited room.
func (a *Audit) Room() string { return a.room }

// Frame records an event (any type but "resync"), a resync frame or an expired
// marker ("expired": the event is delivered, as its marker), by its id. Anchors
// are not events: leave them out.
func (a *Audit) Frame(id, event string) {
	pos, err := wire.ParsePosition(id)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.problemLocked("bad id %q", id)
		return
	}
	a.noteLocked(event + " " + id)
	if event == "resync" {
		a.resyncs++
		switch {
		case !a.allowResync:
			a.problemLocked("resync to %s (was at %s)", pos, a.last)
		case pos.Epoch == a.last.Epoch && pos.Seq > a.last.Seq:
			a.lost = append(a.lost, SeqRange{a.last.Seq + 1, pos.Seq})
		case pos.Epoch != a.last.Epoch && a.last.Epoch != "":
			a.problemLocked("resync to another epoch %s (was %s)", pos, a.last)
		}
		a.track.Resync([]byte(pos.Epoch), pos.Seq)
		a.last = pos
		return
	}
	observe := a.track.Observe
	if event == wire.ExpiredType {
		observe = a.track.ObserveExpired
	}
	if v := observe([]byte(pos.Epoch), pos.Seq); v != InOrder {
		a.problemLocked("event %s after %s: %s", pos, a.last, v)
	}
	a.got[pos.Seq]++
	a.last = pos
}

// Last returns the position of the last event or resync: where to resume.
func (a *Audit) Last() wire.Position {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// Resyncs returns how many resyncs the subscriber was sent.
func (a *Audit) Resyncs() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.resyncs
}

// Note adds an entry (a reconnect, an end of stream) to the trace.
func (a *Audit) Note(entry string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.noteLocked(entry)
}

// Problem records something wrong that the frames alone do not show (a status, a
// content type).
func (a *Audit) Problem(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.problemLocked(format, args...)
}

// Trace returns a copy of the trace.
func (a *Audit) Trace() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.trace...)
}

func (a *Audit) noteLocked(entry string) {
	if len(a.trace) >= maxTrace {
		a.trace = append(a.trace[:0], a.trace[maxTrace/2:]...)
	}
	a.trace = append(a.trace, entry)
}

func (a *Audit) problemLocked(format string, args ...any) {
	if len(a.problems) >= maxProblems {
		a.more++
		return
	}
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
}

// Settle waits for the publishers (already told to stop) to return, reporting the
// publishes that failed for good, then up to within for every audit to reach its
// room's newest acknowledged seq, reporting those that do not.
func (l *Ledger) Settle(t testing.TB, audits []*Audit, within time.Duration) {
	t.Helper()
	l.Wait()
	l.mu.Lock()
	for i, f := range l.failed {
		if i == 10 {
			t.Errorf("... and %d more failed publishes", len(l.failed)-10)
			break
		}
		t.Errorf("publish failed for good: %s", f)
	}
	l.mu.Unlock()
	behind := func() []string {
		var out []string
		for _, a := range audits {
			if top, last := l.Top(a.room), a.Last(); last.Seq < top {
				out = append(out, fmt.Sprintf("%s stopped at %s, want seq %d", a.room, last, top))
			}
		}
		return out
	}
	if err := polltest.Until(within, func() bool { return len(behind()) == 0 }); err != nil {
		for i, b := range behind() {
			if i == 10 {
				t.Errorf("... %d subscribers behind in all", len(behind()))
				break
			}
			t.Errorf("subscriber of %s", b)
		}
	}
}

// Loss is what subscribers received against what was acknowledged.
type Loss struct {
	Acked     int // acknowledged events
	Expected  int // deliveries owed: the acknowledged events of each subscriber's room
	Missing   int // owed deliveries that never came
	Duplicate int // deliveries past the first of a seq
	Explained int // owed seqs a resync declared lost, delivered or not
	Phantom   int // deliveries of seqs never acknowledged
	Resyncs   int
	Retries   int // publish retries
	Expired   int // deliveries that were expired markers (delivered, not missing)
}

func (r Loss) String() string {
	return fmt.Sprintf("%d events acknowledged, %d deliveries owed, %d missing (loss %.4f%%), %d duplicates, %d lost to resyncs, %d never acknowledged, %d resyncs, %d publish retries, %d expired",
		r.Acked, r.Expected, r.Missing, 100*float64(r.Missing)/math.Max(1, float64(r.Expected)), r.Duplicate, r.Explained, r.Phantom, r.Resyncs, r.Retries, r.Expired)
}

// Check compares every audit with the ledger and reports (the first 20 of) what is
// wrong: each audit's problems; an acknowledged seq of its room delivered other than
// once that no resync declared lost; and deliveries of seqs never acknowledged,
// beyond the publishes abandoned unanswered in that room (each may have landed). It
// returns the totals.
func (l *Ledger) Check(t testing.TB, audits []*Audit) Loss {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	rep := Loss{Retries: l.retries}
	for _, seqs := range l.acked {
		rep.Acked += len(seqs)
	}
	reported := 0
	report := func(format string, args ...any) {
		if reported++; reported <= maxProblems {
			t.Errorf(format, args...)
		}
	}
	for _, a := range audits {
		a.mu.Lock()
		rep.Resyncs += a.resyncs
		rep.Expired += int(a.track.Expired)
		for _, p := range a.problems {
			report("subscriber of %s: %s; trace %v", a.room, p, a.trace)
		}
		if a.more > 0 {
			report("subscriber of %s: %d more problems", a.room, a.more)
		}
		acked := l.acked[a.room]
		rep.Expected += len(acked)
		for _, seq := range sortedSeqs(acked) {
			n := a.got[seq]
			switch {
			case n == 1:
			case a.lostLocked(seq):
				rep.Explained++
			case n == 0:
				rep.Missing++
				report("subscriber of %s: acknowledged seq %d never delivered (last %s); trace %v", a.room, seq, a.last, a.trace)
			default:
				rep.Duplicate += n - 1
				report("subscriber of %s: acknowledged seq %d delivered %d times; trace %v", a.room, seq, n, a.trace)
			}
		}
		var phantoms []uint64
		for seq, n := range a.got {
			if !acked[seq] {
				rep.Phantom += n
				phantoms = append(phantoms, seq)
			}
		}
		if len(phantoms) > l.abandoned[a.room] {
			sort.Slice(phantoms, func(i, j int) bool { return phantoms[i] < phantoms[j] })
			report("subscriber of %s: seqs %v delivered but never acknowledged, and only %d publishes were abandoned unanswered", a.room, phantoms, l.abandoned[a.room])
		}
		a.mu.Unlock()
	}
	if reported > maxProblems {
		t.Errorf("... %d problems in all", reported)
	}
	return rep
}

// lostLocked reports whether a resync declared seq lost.
func (a *Audit) lostLocked(seq uint64) bool {
	for _, r := range a.lost {
		if seq >= r.Lo && seq <= r.Hi {
			return true
		}
	}
	return false
}

func sortedSeqs(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for seq := range m {
		out = append(out, seq)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
