package gateway

import (
	"time"

	"github.com/roomcast/roomcast/rooms"
)

// Liveness of a WebSocket connection, the same rule on both paths: the server pings
// the peer every Config.WSPing, and a ping that neither its pong nor any other frame
// from the peer answers within Config.WSPongTimeout closes the connection with 4408.
// A peer that goes silent is therefore closed, and out of the pod's counts, within
// one ping interval and one pong timeout of its last frame (on the idle loop, plus
// at most two sweeps of its worker, each at most 250 ms apart). The library's path
// waits for the pong on the ping's goroutine; the loop's worker checks the deadline
// in its sweep, with no timer of the connection's own.

// silent reports whether a ping sent at sent (Unix nanoseconds) is still
// unanswered at now, past the pong timeout: no pong and no frame since.
func (wc *wsConn) silent(now time.Time, sent int64) bool {
	return wc.lastSeen.Load() < sent && now.UnixNano()-sent >= int64(wc.s.cfg.WSPongTimeout)
}

// kickSilent closes a connection whose ping went unanswered.
func (wc *wsConn) kickSilent() {
	wc.kick(wsTimeout, "no pong within "+wc.s.cfg.WSPongTimeout.String()+" of a ping")
}

// liveness is the idle loop's side of the rule, run by the worker's sweep: it
// closes a connection whose ping went unanswered and pings one whose last ping was
// answered at least a ping interval ago. wc.pinging says a ping waits for its
// answer.
func (t wsLoopConn) liveness(c *conn, now time.Time) rooms.Reason {
	s, lp := t.s, t.lp
	if t.pinging.Load() {
		sent := lp.pinged.UnixNano()
		if t.silent(now, sent) {
			t.kickSilent()
			return reasonKicked
		}
		if t.lastSeen.Load() < sent {
			return 0 // the ping still waits for its answer
		}
		t.pinging.Store(false)
	}
	if now.Sub(lp.pinged) >= s.cfg.WSPing {
		lp.pinged = now
		t.pinging.Store(true)
		if err := c.send(wsPingFrame); err != nil {
			return rooms.ReasonWriteFailed
		}
	}
	return 0
}

// sweepEvery is how often the loop's sweep looks at the connection: every sweep
// while a ping waits for its answer (so that its deadline is kept to a sweep), else
// every ping interval or third of the claim's TTL, whichever is shorter.
func (t wsLoopConn) sweepEvery() time.Duration {
	if t.pinging.Load() {
		return time.Nanosecond // every sweep; never 0, which a ticker refuses
	}
	return min(t.s.cfg.WSPing, t.s.cfg.OwnerTTL/3)
}
