package gatewaytest

import "bytes"

// MaxMissingRanges bounds how many holes a tracker remembers individually; holes past
// it are only counted and can no longer be filled by a late arrival.
const MaxMissingRanges = 64

// SeqRange is an inclusive run of missing seqs.
type SeqRange struct{ Lo, Hi uint64 }

// Tracker checks one subscriber's view of one room: from the first seq it sees, every
// later seq must be exactly the previous one plus one, within one epoch, across
// reconnects. A resync moves the expected position, but never makes a seq already
// delivered in the same epoch new again: after a resync that goes behind what was
// delivered, a repeated seq is a duplicate. It is owned by one goroutine.
type Tracker struct {
	epoch   []byte
	started bool
	last    uint64 // the expected position: the last seq seen, or the resync's seq
	// high is the highest seq delivered in this epoch (0: none yet). It only grows
	// within an epoch; a resync in the same epoch leaves it alone.
	high uint64

	// afterResync: the next event may carry the resync's seq (read as "next") or the
	// one after it (read as "head"); both are accepted without a gap.
	afterResync bool
	first       uint64 // ExpectFirst's seq; 0: any
	resyncHead  bool   // ResyncIsHead: only the seq after a resync's continues it

	missing []SeqRange
	// overflowGaps counts missing seqs that did not fit in missing.
	overflowGaps uint64

	Duplicates   uint64 // seqs seen twice
	Late         uint64 // missing seqs that arrived later, out of order
	Resyncs      uint64
	EpochChanges uint64 // a new epoch without a resync frame announcing it
	// Skipped counts the seqs resyncs jumped over forward within their epoch (from
	// ExpectFirst's seq, for a resync before the first event): losses the server
	// announced, which a queue policy that drops events makes. They are not gaps.
	Skipped uint64
	// Expired counts the seqs delivered as expired markers (ObserveExpired): the
	// event's deadline passed before it was delivered. They are delivered, not lost.
	Expired uint64
}

// Verdict is what Observe made of one event.
type Verdict int

const (
	InOrder     Verdict = iota + 1 // the next seq (or the first one seen)
	Gap                            // seqs before it are missing
	Duplicate                      // delivered before in this epoch
	LateArrival                    // fills a hole, out of order
	EpochChange                    // a new epoch no resync announced
)

func (v Verdict) String() string {
	switch v {
	case InOrder:
		return "in order"
	case Gap:
		return "gap"
	case Duplicate:
		return "duplicate"
	case LateArrival:
		return "late"
	case EpochChange:
		return "epoch change"
	}
	return "unknown"
}

// ExpectFirst makes the first event the tracker sees answer to seq: a later first
// event counts the seqs before it as missing. Without it, the first event seen may
// have any seq (a subscriber that joins a busy room).
func (t *Tracker) ExpectFirst(seq uint64) { t.first = seq }

// ResyncIsHead reads a resync's seq as the head the stream continues after, as the
// gateway sends it: the next event must be the one after it, and an event carrying
// the resync's own seq is a duplicate. Without it both are accepted, for servers
// that send the next seq instead.
func (t *Tracker) ResyncIsHead() { t.resyncHead = true }

// Observe records an event and says what it was.
func (t *Tracker) Observe(epoch []byte, seq uint64) Verdict {
	switch {
	case !t.started:
		t.start(epoch, seq)
		if t.first > 0 && seq > t.first {
			t.addMissing(t.first, seq-1)
			return Gap
		}
		return InOrder
	case !bytes.Equal(epoch, t.epoch):
		t.EpochChanges++
		t.start(epoch, seq)
		return EpochChange
	case seq > t.high && (seq > t.last || t.afterResync && !t.resyncHead && seq == t.last):
		// New ground. After a resync the expected position may sit behind what was
		// delivered; the seqs between were delivered, not missed.
		v := InOrder
		if from := max(t.last, t.high) + 1; seq > from {
			t.addMissing(from, seq-1)
			v = Gap
		}
		t.afterResync = false
		t.last = seq
		t.high = seq
		return v
	default:
		// Delivered before in this epoch (or a hole filled late), whatever a resync
		// in between said.
		t.afterResync = false
		t.last = max(t.last, seq)
		if t.fill(seq) {
			t.Late++
			return LateArrival
		}
		t.Duplicates++
		return Duplicate
	}
}

// ObserveExpired records an expired marker: the event at seq was delivered as its
// marker because its deadline had passed. It moves the position on like an event
// (it is no gap, and a repeat is a duplicate) and counts in Expired.
func (t *Tracker) ObserveExpired(epoch []byte, seq uint64) Verdict {
	v := t.Observe(epoch, seq)
	if v != Duplicate {
		t.Expired++
	}
	return v
}

// Resync records a resync frame: the stream continues from seq in epoch.
func (t *Tracker) Resync(epoch []byte, seq uint64) {
	t.Resyncs++
	switch {
	case t.started && bytes.Equal(epoch, t.epoch):
		if from := max(t.last, t.high); seq > from {
			t.Skipped += seq - from
		}
	case !t.started && t.first > 0 && seq >= t.first:
		t.Skipped += seq - t.first + 1
	}
	if !t.started || !bytes.Equal(epoch, t.epoch) {
		t.high = 0
	}
	t.epoch = append(t.epoch[:0], epoch...)
	t.started = true
	t.afterResync = true
	t.last = seq
}

func (t *Tracker) start(epoch []byte, seq uint64) {
	t.epoch = append(t.epoch[:0], epoch...)
	t.started = true
	t.afterResync = false
	t.last = seq
	t.high = seq
}

func (t *Tracker) addMissing(lo, hi uint64) {
	if len(t.missing) >= MaxMissingRanges {
		t.overflowGaps += hi - lo + 1
		return
	}
	t.missing = append(t.missing, SeqRange{lo, hi})
}

// fill removes seq from the missing ranges and reports whether it was missing.
func (t *Tracker) fill(seq uint64) bool {
	for i, r := range t.missing {
		if seq < r.Lo || seq > r.Hi {
			continue
		}
		switch {
		case r.Lo == r.Hi:
			t.missing = append(t.missing[:i], t.missing[i+1:]...)
		case seq == r.Lo:
			t.missing[i].Lo++
		case seq == r.Hi:
			t.missing[i].Hi--
		default:
			// Split the range; past the bound the upper part is only counted.
			upper := SeqRange{seq + 1, r.Hi}
			t.missing[i].Hi = seq - 1
			if len(t.missing) >= MaxMissingRanges {
				t.overflowGaps += upper.Hi - upper.Lo + 1
			} else {
				t.missing = append(t.missing, SeqRange{})
				copy(t.missing[i+2:], t.missing[i+1:])
				t.missing[i+1] = upper
			}
		}
		return true
	}
	return false
}

// Gaps returns the number of seqs still missing.
func (t *Tracker) Gaps() uint64 {
	n := t.overflowGaps
	for _, r := range t.missing {
		n += r.Hi - r.Lo + 1
	}
	return n
}

// Lossy reports whether the subscriber saw anything a resync does not explain.
func (t *Tracker) Lossy() bool {
	return t.Gaps() > 0 || t.Duplicates > 0 || t.Late > 0 || t.EpochChanges > 0
}

// Missing returns the holes the tracker remembers, oldest first (at most
// MaxMissingRanges; Gaps counts the rest too).
func (t *Tracker) Missing() []SeqRange { return append([]SeqRange(nil), t.missing...) }

// Last returns the expected position: the last seq seen, or the last resync's seq.
func (t *Tracker) Last() uint64 { return t.last }
