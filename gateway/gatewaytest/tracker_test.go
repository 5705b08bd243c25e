package gatewaytest

import (
	"slices"
	"testing"
)

// step is one thing a subscriber sees: an event, or a resync frame when resync is set.
type step struct {
	epoch  string
	seq    uint64
	resync bool
}

func ev(seqs ...uint64) []step {
	out := make([]step, len(seqs))
	for i, s := range seqs {
		out[i] = step{epoch: "e", seq: s}
	}
	return out
}

func TestTracker(t *testing.T) {
	tests := []struct {
		name         string
		steps        []step
		gaps         uint64
		dups         uint64
		late         uint64
		epochChanges uint64
		resyncs      uint64
		missing      []SeqRange
	}{
		{name: "dense from 1", steps: ev(1, 2, 3, 4)},
		{name: "dense from the middle", steps: ev(41, 42, 43)},
		{name: "one gap", steps: ev(1, 2, 5, 6), gaps: 2, missing: []SeqRange{{3, 4}}},
		{name: "two gaps", steps: ev(1, 3, 5), gaps: 2, missing: []SeqRange{{2, 2}, {4, 4}}},
		{name: "duplicate", steps: ev(1, 2, 2, 3), dups: 1},
		{name: "replayed old event", steps: ev(5, 6, 7, 5), dups: 1},
		{name: "late arrival fills the hole", steps: ev(1, 3, 2, 4), late: 1},
		{name: "late arrival splits a range", steps: ev(1, 5, 3), gaps: 2, late: 1, missing: []SeqRange{{2, 2}, {4, 4}}},
		{name: "late arrivals at range ends", steps: ev(1, 5, 2, 4), gaps: 1, late: 2, missing: []SeqRange{{3, 3}}},
		{name: "epoch change without resync", steps: []step{{"a", 5, false}, {"b", 1, false}, {"b", 2, false}}, epochChanges: 1},
		{name: "resync explains a jump", steps: []step{{"e", 1, false}, {"e", 2, false}, {"e", 90, true}, {"e", 91, false}}, resyncs: 1},
		{name: "resync to new epoch", steps: []step{{"a", 7, false}, {"b", 3, true}, {"b", 4, false}, {"b", 5, false}}, resyncs: 1},
		{name: "resync seq read as next", steps: []step{{"e", 1, false}, {"e", 90, true}, {"e", 90, false}, {"e", 91, false}}, resyncs: 1},
		{name: "resync as first frame", steps: []step{{"e", 10, true}, {"e", 11, false}}, resyncs: 1},
		{name: "gap after resync", steps: []step{{"e", 10, true}, {"e", 14, false}}, resyncs: 1, gaps: 3, missing: []SeqRange{{11, 13}}},
		{name: "duplicate after resync", steps: []step{{"e", 10, true}, {"e", 11, false}, {"e", 11, false}}, resyncs: 1, dups: 1},
		{name: "behind a forward resync", steps: []step{{"e", 1, false}, {"e", 90, true}, {"e", 50, false}, {"e", 91, false}}, resyncs: 1, dups: 1},
		{name: "backwards resync then repeats", steps: []step{{"e", 11, false}, {"e", 12, false}, {"e", 13, false}, {"e", 11, true}, {"e", 12, false}, {"e", 13, false}, {"e", 14, false}}, resyncs: 1, dups: 2},
		{name: "backwards resync then its own seq", steps: []step{{"e", 11, false}, {"e", 12, false}, {"e", 13, false}, {"e", 11, true}, {"e", 11, false}, {"e", 14, false}}, resyncs: 1, dups: 1},
		{name: "backwards resync then new ground", steps: []step{{"e", 11, false}, {"e", 12, false}, {"e", 13, false}, {"e", 11, true}, {"e", 14, false}, {"e", 15, false}}, resyncs: 1},
		{name: "backwards resync then a gap", steps: []step{{"e", 11, false}, {"e", 12, false}, {"e", 13, false}, {"e", 11, true}, {"e", 16, false}}, resyncs: 1, gaps: 2, missing: []SeqRange{{14, 15}}},
		{name: "resync at the head then the head again", steps: []step{{"e", 1, false}, {"e", 2, false}, {"e", 2, true}, {"e", 2, false}, {"e", 3, false}}, resyncs: 1, dups: 1},
		{name: "resync to new epoch forgets the old one", steps: []step{{"a", 11, false}, {"a", 12, false}, {"b", 3, true}, {"b", 4, false}, {"b", 11, false}}, resyncs: 1, gaps: 6, missing: []SeqRange{{5, 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			for _, s := range tt.steps {
				if s.resync {
					tr.Resync([]byte(s.epoch), s.seq)
				} else {
					tr.Observe([]byte(s.epoch), s.seq)
				}
			}
			if tr.Gaps() != tt.gaps || tr.Duplicates != tt.dups || tr.Late != tt.late ||
				tr.EpochChanges != tt.epochChanges || tr.Resyncs != tt.resyncs {
				t.Errorf("gaps %d dups %d late %d epochChanges %d resyncs %d; want %d %d %d %d %d",
					tr.Gaps(), tr.Duplicates, tr.Late, tr.EpochChanges, tr.Resyncs,
					tt.gaps, tt.dups, tt.late, tt.epochChanges, tt.resyncs)
			}
			if !slices.Equal(tr.missing, tt.missing) {
				t.Errorf("missing = %v, want %v", tr.missing, tt.missing)
			}
			wantLossy := tt.gaps+tt.dups+tt.late+tt.epochChanges > 0
			if tr.Lossy() != wantLossy {
				t.Errorf("lossy = %v, want %v", tr.Lossy(), wantLossy)
			}
		})
	}
}

func TestTrackerBoundsMissing(t *testing.T) {
	var tr Tracker
	seq := uint64(1)
	tr.Observe([]byte("e"), seq)
	for range MaxMissingRanges + 10 {
		seq += 2 // skip one each time
		tr.Observe([]byte("e"), seq)
	}
	if len(tr.missing) != MaxMissingRanges {
		t.Errorf("remembered %d ranges, want the bound %d", len(tr.missing), MaxMissingRanges)
	}
	if got, want := tr.Gaps(), uint64(MaxMissingRanges+10); got != want {
		t.Errorf("gaps = %d, want %d", got, want)
	}
	// A late arrival for a remembered hole still fills it.
	tr.Observe([]byte("e"), 2)
	if tr.Late != 1 || tr.Gaps() != MaxMissingRanges+9 {
		t.Errorf("late %d gaps %d after filling seq 2", tr.Late, tr.Gaps())
	}
}

func TestTrackerVerdicts(t *testing.T) {
	var tr Tracker
	tr.ExpectFirst(1)
	e := []byte("e")
	steps := []struct {
		seq  uint64
		want Verdict
	}{{3, Gap}, {4, InOrder}, {2, LateArrival}, {4, Duplicate}, {1, LateArrival}, {5, InOrder}}
	for _, s := range steps {
		if got := tr.Observe(e, s.seq); got != s.want {
			t.Errorf("seq %d: %v, want %v", s.seq, got, s.want)
		}
	}
	if got := tr.Observe([]byte("f"), 1); got != EpochChange {
		t.Errorf("new epoch: %v, want %v", got, EpochChange)
	}
	if tr.Gaps() != 0 || tr.Late != 2 || tr.Duplicates != 1 || tr.EpochChanges != 1 {
		t.Errorf("gaps %d late %d dups %d epoch changes %d", tr.Gaps(), tr.Late, tr.Duplicates, tr.EpochChanges)
	}

	var any Tracker
	if got := any.Observe(e, 41); got != InOrder {
		t.Errorf("first event without ExpectFirst: %v, want %v", got, InOrder)
	}
}

// TestTrackerExpired: an expired marker is a delivery: it keeps the sequence dense
// (no gap before the next event), a repeat of it is a duplicate, and each new one
// counts in Expired; the tracker stays lossless.
func TestTrackerExpired(t *testing.T) {
	var tr Tracker
	tr.ExpectFirst(1)
	e := []byte("e")
	steps := []struct {
		seq     uint64
		expired bool
		want    Verdict
	}{{1, false, InOrder}, {2, true, InOrder}, {3, true, InOrder}, {4, false, InOrder}, {6, true, Gap}, {5, false, LateArrival}}
	for _, s := range steps {
		observe := tr.Observe
		if s.expired {
			observe = tr.ObserveExpired
		}
		if got := observe(e, s.seq); got != s.want {
			t.Errorf("seq %d (expired %v): %v, want %v", s.seq, s.expired, got, s.want)
		}
	}
	if tr.Expired != 3 || tr.Gaps() != 0 || tr.Duplicates != 0 {
		t.Errorf("expired %d gaps %d dups %d, want 3 0 0", tr.Expired, tr.Gaps(), tr.Duplicates)
	}
	if got := tr.ObserveExpired(e, 3); got != Duplicate || tr.Expired != 3 {
		t.Errorf("a repeated marker: %v, expired %d; want a duplicate not counted", got, tr.Expired)
	}
	var clean Tracker
	clean.ObserveExpired(e, 1)
	clean.Observe(e, 2)
	if clean.Lossy() {
		t.Errorf("a tracker that saw only a marker and an event is lossy: %+v", clean)
	}
}

func TestTrackerResyncIsHead(t *testing.T) {
	e := []byte("e")
	var tr Tracker
	tr.ResyncIsHead()
	tr.Observe(e, 1)
	tr.Resync(e, 90)
	if got := tr.Observe(e, 90); got != Duplicate {
		t.Errorf("the resync's own seq: %v, want %v", got, Duplicate)
	}
	if got := tr.Observe(e, 91); got != InOrder {
		t.Errorf("the seq after the resync's: %v, want %v", got, InOrder)
	}
	tr.Resync(e, 100)
	if got := tr.Observe(e, 102); got != Gap || tr.Gaps() != 1 {
		t.Errorf("a seq past the resync's next: %v with %d gaps, want %v with 1", got, tr.Gaps(), Gap)
	}
}

// TestTrackerSkipped: a resync forward within its epoch counts the seqs it jumps
// over as skipped, not missing; one behind, at the same place or to another epoch
// skips nothing.
func TestTrackerSkipped(t *testing.T) {
	for _, tc := range []struct {
		name    string
		first   uint64
		steps   []step
		skipped uint64
	}{
		{name: "forward", steps: []step{{"e", 1, false}, {"e", 2, false}, {"e", 9, true}, {"e", 10, false}}, skipped: 7},
		{name: "twice", steps: []step{{"e", 1, false}, {"e", 4, true}, {"e", 5, false}, {"e", 8, true}, {"e", 9, false}}, skipped: 6},
		{name: "before the first event", first: 1, steps: []step{{"e", 36, true}, {"e", 37, false}}, skipped: 36},
		{name: "behind", steps: []step{{"e", 5, false}, {"e", 6, false}, {"e", 3, true}, {"e", 7, false}}},
		{name: "at the head", steps: []step{{"e", 5, false}, {"e", 5, true}, {"e", 6, false}}},
		{name: "another epoch", steps: []step{{"a", 5, false}, {"b", 9, true}, {"b", 10, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tracker
			tr.ResyncIsHead()
			tr.ExpectFirst(tc.first)
			for _, s := range tc.steps {
				if s.resync {
					tr.Resync([]byte(s.epoch), s.seq)
				} else {
					tr.Observe([]byte(s.epoch), s.seq)
				}
			}
			if tr.Skipped != tc.skipped || tr.Lossy() {
				t.Fatalf("skipped %d (lossy %v, gaps %d, dups %d), want %d and nothing lossy", tr.Skipped, tr.Lossy(), tr.Gaps(), tr.Duplicates, tc.skipped)
			}
		})
	}
}
