package main

import "bytes"

// maxMissingRanges bounds how many holes a tracker remembers individually; holes past
// it are only counted and can no longer be filled by a late arrival.
const maxMissingRanges = 64

// seqRange is an inclusive run of missing seqs.
type seqRange struct{ lo, hi uint64 }

// tracker checks one subscriber's view of one room: from the first seq it sees, every
// later seq must be exactly the previous one plus one, within one epoch, across
// reconnects. It is owned by one goroutine.
type tracker struct {
	epoch   []byte
	started bool
	last    uint64

	// afterResync: the next event may carry the resync's seq (read as "next") or the
	// one after it (read as "head"); both are accepted without a gap.
	afterResync bool

	missing []seqRange
	// overflowGaps counts missing seqs that did not fit in missing.
	overflowGaps uint64

	duplicates   uint64 // seqs seen twice
	late         uint64 // missing seqs that arrived later, out of order
	resyncs      uint64
	epochChanges uint64 // a new epoch without a resync frame announcing it
}

// observe records an event.
func (t *tracker) observe(epoch []byte, seq uint64) {
	switch {
	case !t.started:
		t.start(epoch, seq)
	case !bytes.Equal(epoch, t.epoch):
		t.epochChanges++
		t.start(epoch, seq)
	case t.afterResync && (seq == t.last || seq == t.last+1):
		t.afterResync = false
		t.last = seq
	case seq == t.last+1:
		t.last = seq
	case seq > t.last:
		t.addMissing(t.last+1, seq-1)
		t.afterResync = false
		t.last = seq
	default:
		if t.fill(seq) {
			t.late++
		} else {
			t.duplicates++
		}
	}
}

// resync records a resync frame: the stream continues from seq in epoch.
func (t *tracker) resync(epoch []byte, seq uint64) {
	t.resyncs++
	t.epoch = append(t.epoch[:0], epoch...)
	t.started = true
	t.afterResync = true
	t.last = seq
}

func (t *tracker) start(epoch []byte, seq uint64) {
	t.epoch = append(t.epoch[:0], epoch...)
	t.started = true
	t.afterResync = false
	t.last = seq
}

func (t *tracker) addMissing(lo, hi uint64) {
	if len(t.missing) >= maxMissingRanges {
		t.overflowGaps += hi - lo + 1
		return
	}
	t.missing = append(t.missing, seqRange{lo, hi})
}

// fill removes seq from the missing ranges and reports whether it was missing.
func (t *tracker) fill(seq uint64) bool {
	for i, r := range t.missing {
		if seq < r.lo || seq > r.hi {
			continue
		}
		switch {
		case r.lo == r.hi:
			t.missing = append(t.missing[:i], t.missing[i+1:]...)
		case seq == r.lo:
			t.missing[i].lo++
		case seq == r.hi:
			t.missing[i].hi--
		default:
			// Split the range; past the bound the upper part is only counted.
			upper := seqRange{seq + 1, r.hi}
			t.missing[i].hi = seq - 1
			if len(t.missing) >= maxMissingRanges {
				t.overflowGaps += upper.hi - upper.lo + 1
			} else {
				t.missing = append(t.missing, seqRange{})
				copy(t.missing[i+2:], t.missing[i+1:])
				t.missing[i+1] = upper
			}
		}
		return true
	}
	return false
}

// gaps returns the number of seqs still missing.
func (t *tracker) gaps() uint64 {
	n := t.overflowGaps
	for _, r := range t.missing {
		n += r.hi - r.lo + 1
	}
	return n
}

// lossy reports whether the subscriber saw anything a resync does not explain.
func (t *tracker) lossy() bool {
	return t.gaps() > 0 || t.duplicates > 0 || t.late > 0 || t.epochChanges > 0
}
