package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/roomcast/roomcast/replay"
)

// steeredLog is a memory log whose doorbell can swallow rings, ring forged events,
// and whose next Since can be held after it has read, so a test can force a repair
// to be in flight while something else happens.
type steeredLog struct {
	*replay.MemoryLog

	mu      sync.Mutex
	rings   map[string]func(replay.Event)
	swallow bool
	gate    chan struct{} // the next Since waits on it after reading
	before  bool          // the gate holds the next Since before it reads instead
	entered chan struct{}
}

// Unwrap is the log it wraps, whose control plane it has (replay.ControlOf).
func (l *steeredLog) Unwrap() replay.Log { return l.MemoryLog }

func newSteeredLog(t *testing.T, cfg replay.MemoryConfig) *steeredLog {
	t.Helper()
	mem, err := replay.NewMemoryLog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &steeredLog{MemoryLog: mem, rings: map[string]func(replay.Event){}, entered: make(chan struct{}, 1)}
}

func (l *steeredLog) Subscribe(ctx context.Context, room string, ring func(replay.Event)) error {
	l.mu.Lock()
	l.rings[room] = ring
	l.mu.Unlock()
	return l.MemoryLog.Subscribe(ctx, room, func(ev replay.Event) {
		l.mu.Lock()
		swallow := l.swallow
		l.mu.Unlock()
		if !swallow {
			ring(ev)
		}
	})
}

// ring rings room's doorbell with ev, as a bus would.
func (l *steeredLog) ring(room string, ev replay.Event) {
	l.mu.Lock()
	ring := l.rings[room]
	l.mu.Unlock()
	ring(ev)
}

func (l *steeredLog) setSwallow(on bool) {
	l.mu.Lock()
	l.swallow = on
	l.mu.Unlock()
}

// holdNextSince makes the next Since wait, after reading, until the returned
// channel is closed; entered receives once it waits.
func (l *steeredLog) holdNextSince() chan struct{} {
	release := make(chan struct{})
	l.mu.Lock()
	l.gate = release
	l.mu.Unlock()
	return release
}

// holdNextSinceBeforeRead is holdNextSince with the wait before the read.
func (l *steeredLog) holdNextSinceBeforeRead() chan struct{} {
	release := l.holdNextSince()
	l.mu.Lock()
	l.before = true
	l.mu.Unlock()
	return release
}

func (l *steeredLog) Since(ctx context.Context, room string, after replay.Position, limit int) ([]replay.Event, replay.Position, error) {
	l.mu.Lock()
	gate, before := l.gate, l.before
	l.gate, l.before = nil, false
	l.mu.Unlock()
	if gate != nil && before {
		l.entered <- struct{}{}
		<-gate
	}
	evs, head, err := l.MemoryLog.Since(ctx, room, after, limit)
	if gate != nil && !before {
		l.entered <- struct{}{}
		<-gate
	}
	return evs, head, err
}

// TestResumeDuringRepairNeverGoesBack: a client resumes while its room is being
// repaired. It replays the history from the log; the repair's resync, at a point it
// has already passed, and the events the repair then delivers must not take its
// stream back.
func TestResumeDuringRepairNeverGoesBack(t *testing.T) {
	log := newSteeredLog(t, replay.MemoryConfig{History: 5})
	p := newPodOn(t, log, podConfig{})
	const room = "r"
	a := p.subscribe(t, room, "")
	var ids []string
	for range 3 {
		ids = append(ids, p.publish(t, room, `1`))
	}
	for _, id := range ids {
		if f := a.next(); f.id != id {
			t.Fatalf("first member: %+v, want %s", f, id)
		}
	}
	log.setSwallow(true) // 4..10 ring nobody; 4 and 5 are trimmed
	for range 7 {
		ids = append(ids, p.publish(t, room, `1`))
	}
	log.setSwallow(false)
	release := log.holdNextSince()
	ids = append(ids, p.publish(t, room, `1`)) // ring 11 shows the gap: the repair reads, then waits
	<-log.entered
	ids = append(ids, p.publish(t, room, `1`), p.publish(t, room, `1`)) // 12, 13 ring during the repair

	b := p.subscribe(t, room, "", "Last-Event-ID", ids[9])
	for _, id := range ids[10:13] {
		if f := b.next(); f.id != id {
			t.Fatalf("resumed member: %+v, want %s", f, id)
		}
	}
	close(release) // the repair resyncs at the head it reads next, 13
	// The first member lost 4 and 5 for good: a resync at the head, then live.
	head, _ := replay.ParsePosition(ids[12])
	expectResyncAt(t, a, room, head)
	marker := p.publish(t, room, `1`)
	if f := b.next(); f.id != marker {
		t.Fatalf("resumed member after 13: %+v, want %s: the stream repeated itself or went back", f, marker)
	}
	expectIDs(t, a, marker)
}

// TestForkResyncAlwaysGoesThrough: members saw seq 4 and 5 from the doorbell, but
// the log that survived holds another seq 4 and no 5. The repair's resync at 4 is
// behind what the stream sent, and must still reach it, marked as a fork.
func TestForkResyncAlwaysGoesThrough(t *testing.T) {
	log := newSteeredLog(t, replay.MemoryConfig{})
	p := newPodOn(t, log, podConfig{})
	const room = "r"
	s := p.subscribe(t, room, "")
	var last string
	for range 3 {
		last = p.publish(t, room, `1`)
	}
	pos, _ := replay.ParsePosition(last)
	log.setSwallow(true)
	for seq := uint64(4); seq <= 5; seq++ {
		log.ring(room, replay.Event{Room: room, Epoch: pos.Epoch, Seq: seq, TS: 1, Body: []byte(`"lost"`)})
	}
	real := p.publish(t, room, `1`) // the log's own seq 4
	log.setSwallow(false)
	for seq := uint64(1); seq <= 5; seq++ {
		if f := s.next(); f.seq(t) != seq {
			t.Fatalf("got %+v, want seq %d", f, seq)
		}
	}
	log.ring(room, replay.Event{}) // resubscribed: read the log
	f := s.next()
	var data map[string]any
	if err := json.Unmarshal([]byte(f.data), &data); err != nil {
		t.Fatal(err)
	}
	if f.event != "resync" || f.id != real || data["epoch"] != pos.Epoch || data["seq"] != 4.0 || data["fork"] != true {
		t.Fatalf("got %+v, want a resync at %s marked as a fork", f, real)
	}
	next := p.publish(t, room, `1`)
	if f := s.next(); f.id != next {
		t.Fatalf("after the fork: %+v, want %s", f, next)
	}
}

// TestResumeDuringRepairIsNotResyncedPastItsHistory: a client resumes while its room
// waits to repair a gap the log cannot fill. The client's own replay reads on from
// its resume point; events published after that read come to the room as part of
// the repair, whose resync (for members that lost history) is ahead of the client.
// The client lost nothing: it must get those events from the log, not the resync.
func TestResumeDuringRepairIsNotResyncedPastItsHistory(t *testing.T) {
	log := newSteeredLog(t, replay.MemoryConfig{History: 5})
	p := newPodOn(t, log, podConfig{})
	const room = "r"
	a := p.subscribe(t, room, "")
	var ids []string
	for range 3 {
		ids = append(ids, p.publish(t, room, `1`))
	}
	expectIDs(t, a, ids...)
	log.setSwallow(true) // 4..10 ring nobody; 4 and 5 are trimmed
	for range 7 {
		ids = append(ids, p.publish(t, room, `1`))
	}
	log.setSwallow(false)
	release := log.holdNextSinceBeforeRead()
	ids = append(ids, p.publish(t, room, `1`)) // ring 11 starts the repair, held before it reads
	<-log.entered

	b := p.subscribe(t, room, "", "Last-Event-ID", ids[8]) // resumes after 9
	expectIDs(t, b, ids[9:11]...)
	ids = append(ids, p.publish(t, room, `1`), p.publish(t, room, `1`)) // 12, 13 ring during the repair
	close(release)                                                      // the repair reads now: a gap from 3, a resync at 13
	head, _ := replay.ParsePosition(ids[12])
	expectResyncAt(t, a, room, head)
	marker := p.publish(t, room, `1`)
	expectIDs(t, a, marker)
	expectIDs(t, b, append(ids[11:13], marker)...)
}
