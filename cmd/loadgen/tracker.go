package main

import "bytes"

// maxMissingRanges bounds how many holes a tracker remembers individually; holes past
// it are only counted and can no longer be filled by a late arrival.
const maxMissingRanges = 64

// seqRange is an inclusive run of missing seqs.
type seqRange struct{ lo, hi uint64 }

// tracker checks one subscriber's view of one room: from the first seq it sees, every
// later seq must be exactly the previous one plus one, within one epoch, across
// reconnects. A resync moves the expected position, but never makes a seq already
// delivered in the same epoch new again: after a resync that goes behind what was
// delivered, a repeated seq is a duplicate. It is owned by one goroutine.
type tracker struct {
	epoch   []byte
	started bool
	last    uint64 // the expected position: the last seq seen, or the resync's seq
	// high is the highest seq delivered in this epoch (0: none yet). It only grows
	// within an epoch; a resync in the same epoch leaves it alone.
	high uint64

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
	case seq > t.high && (seq > t.last || t.afterResync && seq == t.last):
		// New ground. After a resync the expected position may sit behind what was
		// delivered; the seqs between were delivered, not missed.
		if from := max(t.last, t.high) + 1; seq > from {
			t.addMissing(from, seq-1)
		}
		t.afterResync = false
		t.last = seq
		t.high = seq
	default:
		// Delivered before in this epoch (or a hole filled late), whatever a resync
		// in between said.
		t.afterResync = false
		t.last = max(t.last, seq)
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
	if !t.started || !bytes.Equal(epoch, t.epoch) {
		t.high = 0
	}
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
	t.high = seq
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
