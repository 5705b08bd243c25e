package gateway

import (
	"errors"
	"time"

	"github.com/coder/websocket"
)

// What a client's message after the hello comes to, decided once for both paths:
// the protocol version, the connection's rate limit, then the frame's checks. A
// token bucket per connection (Config.WSRate messages per second, bursts of
// Config.WSBurst) bounds the messages a client sends; it is refilled lazily, on
// each message, with no timer. Acks are not counted: their rate follows the
// events the server sends (a client may ack every one), not the client's will.
// Control frames (pings, pongs, closes) are not counted either.
//
// A message over the limit is dropped. The first is answered with an error frame,
// rate_limited; those that come within wsRateGrace of that answer are dropped
// without one (the client sent them before it read the answer); one over the limit
// after that closes the connection with 1008. A client that slows down until its
// bucket holds half its burst again is warned afresh next time.

// wsPolicyViolation closes a connection that goes on sending over its rate limit.
const wsPolicyViolation websocket.StatusCode = 1008

// wsRateGrace is how long after the rate_limited answer messages over the limit
// are still only dropped: what the client sent before it could read the answer.
const wsRateGrace = time.Second

// wsBucket is a connection's token bucket, in thousandths of a message. Only the
// goroutine that reads the connection's messages (the reader, or the loop's worker)
// touches it.
type wsBucket struct {
	milli  int64 // tokens, in thousandths
	last   int64 // Unix nanoseconds of the last refill; 0: never (a full bucket)
	warned int64 // Unix nanoseconds of the rate_limited answer; 0: not warned
}

// Outcomes of wsBucket.take.
const (
	rateOK    = iota // within the limit
	rateWarn         // over: answer rate_limited, drop the message
	rateDrop         // over, within the grace after the answer: drop it
	rateClose        // over after the grace: close with 1008
)

// take takes one message's token at now (Unix nanoseconds) from a bucket of
// perSecond tokens a second and burst at most.
func (b *wsBucket) take(now int64, perSecond float64, burst int) int {
	full := int64(burst) * 1000
	if b.last == 0 {
		b.milli = full
	} else if d := now - b.last; d > 0 {
		// A bucket refills at most to full: the elapsed time is capped first, so
		// that the product cannot overflow.
		fill := float64(min(d, int64(time.Hour))) * perSecond / 1e6
		b.milli = min(full, b.milli+int64(fill))
	}
	b.last = now
	if b.warned != 0 && b.milli >= full/2 {
		b.warned = 0 // it slowed down: a later excess is warned again
	}
	if b.milli >= 1000 {
		b.milli -= 1000
		return rateOK
	}
	switch {
	case b.warned == 0:
		b.warned = now
		return rateWarn
	case now-b.warned < int64(wsRateGrace):
		return rateDrop
	}
	return rateClose
}

var errRateLimited = newError(0, "rate_limited", "too many frames: the connection takes --ws-rate frames a second (bursts of --ws-burst); this one was dropped, and more over the limit close the connection with 1008")

// wsInbound is what a message after the hello comes to: a frame to serve, or an
// answer in its place (an error frame), or neither (it was dropped); a close code
// ends the connection instead.
type wsInbound struct {
	f      wsFrame
	serve  bool
	answer []byte
	code   websocket.StatusCode
	why    string
}

// inbound decides what a client's message after the hello comes to: text says
// whether it is a text message, p is its payload.
func (wc *wsConn) inbound(now time.Time, text bool, p []byte) wsInbound {
	var (
		f   wsFrame
		err = errWSFrame
	)
	if text {
		f, err = decodeWSFrame(p)
	}
	switch {
	case errors.Is(err, errWSVersion):
		return wsInbound{code: wsBadHello, why: "bad frame: " + err.Error()}
	case err == nil && f.Kind == wsAck:
		// Not counted: acks follow the events the server sends, one each at most.
		return wsInbound{f: f, serve: true}
	}
	if in, limited := wc.limit(now); limited {
		return in
	}
	switch {
	case !text:
		return wsInbound{answer: wsErrorOf("", "", newError(0, "invalid_frame", "frames are JSON text messages"))}
	case err != nil:
		return wsInbound{answer: wsErrorOf("", "", newError(0, "invalid_frame", err.Error()))}
	}
	return wsInbound{f: f, serve: true}
}

// limit takes a message's token from the connection's bucket; limited says the
// message goes no further, and in what comes of it instead.
func (wc *wsConn) limit(now time.Time) (in wsInbound, limited bool) {
	cfg := &wc.s.cfg
	if cfg.WSRate <= 0 {
		return wsInbound{}, false
	}
	switch wc.rate.take(now.UnixNano(), cfg.WSRate, cfg.WSBurst) {
	case rateWarn:
		wc.s.wsRateLimited.WithLabelValues("warned").Inc()
		return wsInbound{answer: wsErrorOf("", "", errRateLimited)}, true
	case rateDrop:
		wc.s.wsRateLimited.WithLabelValues("dropped").Inc()
		return wsInbound{}, true
	case rateClose:
		wc.s.wsRateLimited.WithLabelValues("closed").Inc()
		return wsInbound{code: wsPolicyViolation, why: "rate limit: too many frames after the rate_limited error"}, true
	}
	return wsInbound{}, false
}
