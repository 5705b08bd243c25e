package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"
)

// maxFrame bounds one frame of a stream (the r3labs client's scanner buffer).
const maxFrame = 8 << 20

// Reconnect timing defaults.
const (
	backoffMin = 500 * time.Millisecond // the first wait after a failed connection
	backoffMax = 30 * time.Second       // the longest wait the backoff grows to
	stayUp     = 30 * time.Second       // a connection this long worked, even without a frame
	// idleTimeout ends a stream that has sent nothing, not even a heartbeat, for this
	// long: the connection is taken as dead. The gateway's heartbeat (15s by default)
	// stays below the 60s idle timeouts of the proxies on its path.
	idleTimeout = 60 * time.Second
)

// errIdle is why a silent stream was ended.
var errIdle = errors.New("no bytes, not even a heartbeat, within the idle timeout")

// streamEvent is one dispatched event: a block with data.
type streamEvent struct {
	ID   string // the last event id in force (the block's own, or the one before)
	Type string // "message" when the block named none
	Data []byte
}

// anchorType is the event type of a stream's anchor (gateway.AnchorType).
const anchorType = "anchor"

// expiredType is the event type of an expired marker (gateway.ExpiredType): the
// event at its id outlived its time to live before it was delivered, and comes
// without its body.
const expiredType = "expired"

// errStop ends a follow without an error: the handler got what it wanted.
var errStop = errors.New("stop")

// follower follows one SSE URL for as long as its context lives, with one r3labs
// client (which is not safe to share) used by one goroutine. The r3labs client
// makes one attempt per call (StopBackOff): the loop in run decides when to come
// back, because on its own the client stops on a clean end of stream, never resets
// its backoff and gives up after 15 minutes.
type follower struct {
	url       string
	header    map[string]string // sent on every request (Authorization)
	from      string            // the first Last-Event-ID; "" for none
	transport http.RoundTripper

	// handle sees every event, on run's goroutine. errStop ends run with nil; any
	// other error ends it with that error.
	handle func(streamEvent) error
	// waiting, if set, hears of every wait before a reconnect and why (nil: the
	// stream ended cleanly).
	waiting func(wait time.Duration, cause error)
	// connected, if set, hears of every connection the server took (200, an event
	// stream), with the id it resumes after ("" for none), on run's goroutine.
	connected func(resumeAfter string)
	// anchored, if set, hears of every anchor (where a stream opened without a resume
	// point starts), with its id, on run's goroutine.
	anchored func(id string)
	// comment, if set, hears of every comment line the server sends (without the
	// leading ':' and one space; heartbeats too), on the goroutine that reads the
	// stream, as it is read.
	comment func(string)

	// Timing; zero values take the defaults above. sleep waits d or until ctx ends;
	// now reads the clock; jitter picks the actual backoff wait for d.
	min, max, stayUp, idle time.Duration
	sleep                  func(ctx context.Context, d time.Duration) error
	now                    func() time.Time
	jitter                 func(d time.Duration) time.Duration
}

func (f *follower) defaults() {
	if f.min <= 0 {
		f.min = backoffMin
	}
	if f.max < f.min {
		f.max = max(backoffMax, f.min)
	}
	if f.stayUp <= 0 {
		f.stayUp = stayUp
	}
	if f.idle <= 0 {
		f.idle = idleTimeout
	}
	if f.transport == nil {
		f.transport = http.DefaultTransport
	}
	if f.sleep == nil {
		f.sleep = sleepCtx
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.jitter == nil {
		// Between half and all of d, so that clients that failed together do not
		// come back together.
		f.jitter = func(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run follows the stream until ctx ends (nil), the handler stops it, the server
// refuses it for good (a 4xx answer other than 408 and 429, not an event stream), or the very first
// connection gets no answer (*unreachableError). Every reconnect resumes from the
// last id seen. The wait before a reconnect is the server's retry: hint, or the
// backoff when that is longer; the backoff doubles after each connection that did
// not work and starts over after one that did (it delivered an event or the
// stream's anchor, or stayed up for stayUp).
func (f *follower) run(ctx context.Context) error {
	f.defaults()
	c := sse.NewClient(f.url, sse.ClientMaxBufferSize(maxFrame))
	var idled atomic.Bool // the idle timeout ended the current connection
	c.Connection = &http.Client{Transport: &idleTransport{next: f.transport, idle: f.idle, fired: &idled, comment: f.comment}}
	c.ReconnectStrategy = &backoff.StopBackOff{} // one attempt per call
	for k, v := range f.header {
		c.Headers[k] = v
	}
	if f.from != "" {
		c.LastEventID.Store([]byte(f.from))
	}
	everAnswered := false // some connection got an HTTP answer
	c.ResponseValidator = func(_ *sse.Client, resp *http.Response) error {
		everAnswered = true
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			return readError(resp)
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
			resp.Body.Close()
			return &notStreamError{contentType: printable(resp.Header.Get("Content-Type"), 64)}
		}
		if f.connected != nil {
			// The request carried the id the client held when it was made.
			after, _ := c.LastEventID.Load().([]byte)
			f.connected(string(after))
		}
		return nil
	}
	pause, hint := f.min, time.Duration(0)
	for {
		actx, cancel := context.WithCancel(ctx)
		start := f.now()
		worked := false
		var stopErr error
		err := c.SubscribeRawWithContext(actx, func(ev *sse.Event) {
			if stopErr != nil {
				return // stopping: the read loop may still hand over what it had
			}
			if len(ev.Retry) > 0 {
				if ms, ok := parseMillis(ev.Retry); ok {
					hint = ms
				}
			}
			switch {
			case string(ev.Event) == anchorType:
				// The stream's anchor, where a stream opened without a resume point
				// starts: the client keeps its id to resume from, and it is no event.
				worked = true
				if f.anchored != nil {
					f.anchored(string(ev.ID))
				}
			case len(ev.Data) > 0:
				worked = true
				typ := string(ev.Event)
				if typ == "" {
					typ = "message"
				}
				if err := f.handle(streamEvent{ID: string(ev.ID), Type: typ, Data: ev.Data}); err != nil {
					stopErr = err
					cancel()
				}
			}
		})
		cancel()
		if idled.Swap(false) && ctx.Err() == nil && stopErr == nil {
			err = errIdle
		}
		switch {
		case errors.Is(stopErr, errStop):
			return nil
		case stopErr != nil:
			return stopErr
		case ctx.Err() != nil:
			return nil
		}
		var se *serverError
		var ns *notStreamError
		switch {
		case errors.As(err, &se) && se.Status >= 400 && se.Status < 500 &&
			se.Status != http.StatusRequestTimeout && se.Status != http.StatusTooManyRequests:
			return se // a request that can never succeed (a proxy's 408 and 429 may)
		case errors.As(err, &ns):
			return ns
		case errors.Is(err, bufio.ErrTooLong):
			return fmt.Errorf("a frame is longer than %d bytes", maxFrame)
		case err != nil && !everAnswered:
			return &unreachableError{err: err}
		}
		worked = worked || f.now().Sub(start) >= f.stayUp
		if worked {
			pause = f.min
		}
		wait := max(hint, f.jitter(pause))
		if !worked {
			pause = min(2*pause, f.max)
		}
		if f.waiting != nil {
			f.waiting(wait, err)
		}
		if f.sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// notStreamError is a 200 answer that is not text/event-stream: it never will be.
type notStreamError struct{ contentType string }

func (e *notStreamError) Error() string {
	return fmt.Sprintf("the answer is not an event stream (Content-Type %q)", e.contentType)
}

// parseMillis parses a retry field: ASCII digits, milliseconds, at most a day.
func parseMillis(b []byte) (time.Duration, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return min(time.Duration(n)*time.Millisecond, 24*time.Hour), true
}

// idleTransport ends a response whose body has been silent for idle, by cancelling
// its request (closing a body does not interrupt a read in progress). With comment
// set, it hands every comment line of the body to it as the body is read: the SSE
// client drops them.
type idleTransport struct {
	next    http.RoundTripper
	idle    time.Duration
	fired   *atomic.Bool // set when the timeout ended a response
	comment func(string)
}

func (t *idleTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(r.Context())
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	b := &idleBody{rc: resp.Body, idle: t.idle, cancel: cancel}
	if t.comment != nil {
		b.tap = &commentTap{emit: t.comment, lineStart: true}
	}
	b.timer = time.AfterFunc(t.idle, func() {
		t.fired.Store(true)
		cancel()
	})
	resp.Body = b
	return resp, nil
}

// idleBody restarts its timer whenever bytes arrive, and shows them to its tap.
type idleBody struct {
	rc     io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	tap    *commentTap // nil: none
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.timer.Reset(b.idle)
		if b.tap != nil {
			b.tap.feed(p[:n])
		}
	}
	return n, err
}

// maxComment bounds the part of a comment line a commentTap keeps, in bytes.
const maxComment = 512

// commentTap finds the comment lines (those starting with ':') in a stream read in
// pieces, and emits each whole line without its ':' and one leading space. Lines end
// in CR, LF or CRLF, as the SSE standard says.
type commentTap struct {
	emit      func(string)
	lineStart bool // the next byte starts a line
	in        bool // inside a comment line
	afterCR   bool // the last byte was a CR: a LF now ends no other line
	buf       []byte
}

func (t *commentTap) feed(p []byte) {
	for _, c := range p {
		if c == '\n' && t.afterCR {
			t.afterCR = false
			continue
		}
		t.afterCR = c == '\r'
		if c == '\r' || c == '\n' {
			if t.in {
				t.emit(strings.TrimPrefix(string(t.buf), " "))
				t.in, t.buf = false, t.buf[:0]
			}
			t.lineStart = true
			continue
		}
		if t.lineStart {
			t.lineStart = false
			if c == ':' {
				t.in = true
				continue
			}
		}
		if t.in && len(t.buf) < maxComment {
			t.buf = append(t.buf, c)
		}
	}
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	b.cancel()
	return b.rc.Close()
}
