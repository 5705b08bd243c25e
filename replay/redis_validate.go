package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/roomcast/roomcast/replay/wire"
)

// What Redis hands back (doorbells, log entries) is checked like client input: any
// client with write rights on the keys or SPUBLISH rights on the channels can put
// anything there, and a reader must never pass on an event a publisher could not have
// made through Append.

// wellFormed reports whether ev could have come from Append: an epoch of our shape,
// 1 <= seq <= MaxSeq, a positive publish time, the default type or a valid one (not
// reserved), and a body that is one line of valid JSON.
func wellFormed(ev Event) bool {
	return validEpoch(ev.Epoch) && ev.Seq >= 1 && ev.Seq <= MaxSeq && ev.TS > 0 &&
		(ev.Type == "" || ValidType(ev.Type)) && oneLineJSON(ev.Body)
}

// oneLineJSON reports whether b is one JSON value with no raw CR or LF (JSON allows
// them between tokens; the envelope is one data: line).
func oneLineJSON(b []byte) bool {
	return len(b) > 0 && bytes.IndexAny(b, "\r\n") < 0 && json.Valid(b)
}

// parseTS reads a publish time: plain decimal digits, positive.
func parseTS(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	return ts, err == nil
}

// decodeDoorbell reads a doorbell message, "<epoch> <seq> <ts> <type>\n<body>", or
// "<epoch> <seq> <ts> <type> <expires>\n<body>" for an event with a deadline (the
// publish functions write them), and validates it. false means: ring a zero Event,
// so that the reader goes to the log.
func decodeDoorbell(room, msg string) (Event, bool) {
	header, body, ok := strings.Cut(msg, "\n")
	if !ok {
		return Event{}, false
	}
	f := strings.SplitN(header, " ", 5)
	if len(f) < 4 {
		return Event{}, false
	}
	seq, ok1 := wire.ParseSeq(f[1])
	ts, ok2 := parseTS(f[2])
	ev := Event{Room: room, Epoch: f[0], Seq: seq, TS: ts, Type: f[3], Body: json.RawMessage(body)}
	if len(f) == 5 {
		var ok3 bool
		if ev.Expires, ok3 = parseTS(f[4]); !ok3 {
			return Event{}, false
		}
	}
	if !ok1 || !ok2 || !wellFormed(ev) {
		return Event{}, false
	}
	return ev, true
}

// errBadEntry: a log entry failed validation.
var errBadEntry = errors.New("malformed log entry")

// errBadHead: a room's head (its seq hash) failed validation. Nothing of the room can
// be read or resynced to until it is repaired or expires, so it is unavailable (and
// not retried: classify sees ErrUnavailable).
var errBadHead = fmt.Errorf("%w: malformed room head", ErrUnavailable)

// validHead reports whether a head read from Redis is one the log could have
// written: none at all (no epoch, seq 0), or an epoch of our shape and a seq within
// MaxSeq.
func validHead(epoch string, seq int64) bool {
	if epoch == "" {
		return seq == 0
	}
	return validEpoch(epoch) && seq >= 0 && seq <= MaxSeq
}

// countBadHead counts and rarely logs a read that met a malformed head.
func (l *RedisLog) countBadHead(room string, err error) {
	if errors.Is(err, errBadHead) {
		n := l.badEntries.Add(1)
		l.warnRarely(&l.badEntryLog, "malformed room head: the room is unavailable until it is repaired or expires (check who may write room keys)",
			"room", room, "bad_entries", n)
	}
}

// entryEvent reads one log entry: its id "<seq>-0" and its fields (epoch, ts, type,
// body and, for an event with a deadline, exp, in any order), and validates it as an event of epoch (the head's: a log
// holds one epoch, the publish function deletes it when it starts another).
func entryEvent(room, epoch, id string, fields []string) (Event, error) {
	seqText, rest, _ := strings.Cut(id, "-")
	seq, ok := wire.ParseSeq(seqText)
	if !ok || rest != "0" || len(fields)%2 != 0 {
		return Event{}, fmt.Errorf("%w: id %q", errBadEntry, id)
	}
	ev := Event{Room: room, Seq: seq}
	tsOK, expOK := false, true
	for i := 0; i+1 < len(fields); i += 2 {
		switch v := fields[i+1]; fields[i] {
		case "epoch":
			ev.Epoch = v
		case "ts":
			ev.TS, tsOK = parseTS(v)
		case "type":
			ev.Type = v
		case "body":
			ev.Body = json.RawMessage(v)
		case "exp":
			ev.Expires, expOK = parseTS(v)
		}
	}
	if !tsOK || !expOK || ev.Epoch != epoch || !wellFormed(ev) {
		return Event{}, fmt.Errorf("%w: %q", errBadEntry, id)
	}
	return ev, nil
}

// Bad input from Redis is logged at most once per badLogEvery per kind, with the
// count so far, never with its content.
const badLogEvery = time.Minute

// warnRarely logs msg when the last such line (at *last, Unix nanoseconds) is older
// than badLogEvery.
func (l *RedisLog) warnRarely(last *atomic.Int64, msg string, args ...any) {
	now := time.Now().UnixNano()
	prev := last.Load()
	if prev != 0 && now-prev < int64(badLogEvery) {
		return
	}
	if !last.CompareAndSwap(prev, now) {
		return
	}
	l.cfg.Logger.Warn(msg, args...)
}
