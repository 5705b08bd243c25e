package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// errFatal marks a subscribe answer that can never succeed (a 4xx other than 429, a
// wrong content type): the subscriber stops instead of retrying.
var errFatal = errors.New("subscribe refused")

// defaultRetry is the reconnect delay before the server has sent a retry: field.
const defaultRetry = time.Second

// minRetry keeps a server that asks for retry: 0 from making a busy loop.
const minRetry = 10 * time.Millisecond

var (
	keySeq   = []byte(`"seq":`)
	keyT     = []byte(`"t":`)
	keyTS    = []byte(`"ts":`)
	keyEpoch = []byte(`"epoch":"`)
)

// subscriber holds one stream to one room, SSE or (with ws set) a WebSocket
// connection, and checks what arrives on it. Its goroutine owns every field; the
// atomics are also read by the progress line and the settle phase.
type subscriber struct {
	id   int
	room *room
	hist *histogram // nil in idle mode

	deliveries atomic.Uint64
	lastSeq    atomic.Uint64
	caughtUp   atomic.Bool
	bytes      atomic.Uint64 // stream body bytes read, over every connection
	anomalies  atomic.Uint64 // events out of order, repeated or after a gap, and malformed ones

	// Guarded by loadState.connMu: whether a stream is open and on which pod, how to
	// end it from this side (a client storm), and the storm's accounting.
	open         bool
	pod          int
	cancelConn   context.CancelFunc
	kicked       bool // the open stream was ended on purpose: reconnect without a pause
	stormPending bool // open when the storm began and not reconnected since

	track     gatewaytest.Tracker
	resumeID  []byte
	retry     time.Duration
	connected bool   // a stream was established at least once
	malformed uint64 // events whose envelope had no seq
	fatal     error
	br        *bufio.Reader

	reconnects int64 // connections after the first that got as far as streaming
	ws         *wsState
	mux        *muxStream // a member of a multiplexed stream (mux.go)

	// maxWait is the longest a delivered event waited, from the publish the server
	// accepted (the envelope's ts) to its arrival, in nanoseconds.
	maxWait atomic.Int64
	// firstBad is the first event the tracker did not take in order (for the report).
	firstBad anomaly

	token string // -protocol centrifugo: the connection token
	epoch []byte // -protocol centrifugo: the room's epoch, nil before the first connect
}

// run connects and reconnects until ctx is done or the server refuses for good.
func (s *subscriber) run(ctx context.Context, ls *loadState) {
	s.retry = defaultRetry
	if s.mux != nil && !s.mux.lead(s) {
		return // the stream's lead member holds the connection
	}
	for {
		var err error
		switch {
		case s.mux != nil:
			err = s.streamMux(ctx, ls)
		case s.ws != nil:
			err = s.streamWS(ctx, ls)
		default:
			err = s.stream(ctx, ls)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errFatal) {
			s.fatal = err
			return
		}
		if ls.takeKicked(s) {
			continue
		}
		delay := min(max(s.retry, minRetry), ls.cfg.RetryCap)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stream holds one connection; it returns nil on a clean end of stream.
func (s *subscriber) stream(ctx context.Context, ls *loadState) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pod := ls.pods.pickStream(s.id, s.connected)
	target := ls.pods.url(pod, s.room.streamPath, s.room.streamURL)
	if ls.cfg.Protocol == protocolCentrifugo {
		u, err := s.centrifugoStreamURL()
		if err != nil {
			return fmt.Errorf("%w: %w", errFatal, err)
		}
		target = u
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errFatal, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if len(s.resumeID) > 0 && ls.cfg.Protocol != protocolCentrifugo {
		req.Header.Set("Last-Event-ID", string(s.resumeID))
	}
	resp, err := ls.subClient.Do(req)
	if err != nil {
		ls.connectErrors.Add(1)
		return fmt.Errorf("subscribe %s: %w", s.room.name, err)
	}
	defer resp.Body.Close()
	if err := checkStreamResponse(resp); err != nil {
		ls.connectErrors.Add(1)
		return fmt.Errorf("subscribe %s: %w", s.room.name, err)
	}
	// Open before counted: once the last subscriber counts as connected, the run
	// reads where the streams are.
	ls.streamOpened(s, pod, cancel)
	s.established(ls)
	defer ls.streamClosed(s)

	return s.readEvents(resp.Body, s.resumeID, s.room.name, func(ev gatewaytest.Event) {
		if ls.cfg.Protocol == protocolCentrifugo {
			s.handleCentrifugo(ev, time.Now(), ls)
		} else {
			s.handle(ev, time.Now(), ls)
		}
	})
}

// readEvents decodes the events of a stream's body, resumed from lastID, into
// handle until the stream ends: nil on a clean end of stream. The server's retry:
// is kept for the next reconnect.
func (s *subscriber) readEvents(body io.Reader, lastID []byte, what string, handle func(gatewaytest.Event)) error {
	cr := &countingReader{r: body, n: &s.bytes}
	if s.br == nil {
		s.br = bufio.NewReaderSize(cr, 16<<10)
	} else {
		s.br.Reset(cr)
	}
	dec := gatewaytest.NewDecoder(s.br, lastID)
	defer func() {
		if r, ok := dec.Retry(); ok {
			s.retry = r
		}
	}()
	for {
		ev, err := dec.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read %s: %w", what, err)
		}
		handle(ev)
	}
}

// established counts a connection that got as far as streaming: the subscriber's
// first, or a reconnect.
func (s *subscriber) established(ls *loadState) {
	if s.connected {
		ls.reconnects.Add(1)
		s.reconnects++
		return
	}
	s.connected = true
	ls.markConnected()
}

// checkStreamResponse accepts a 200 text/event-stream answer.
func checkStreamResponse(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		err := fmt.Errorf("status %d", resp.StatusCode)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return fmt.Errorf("%w: %w", errFatal, err)
		}
		return err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return fmt.Errorf("%w: content type %q", errFatal, ct)
	}
	return nil
}

// handle accounts for one SSE event.
func (s *subscriber) handle(ev gatewaytest.Event, now time.Time, ls *loadState) {
	switch string(ev.Type) {
	case gatewaytest.AnchorType:
		if ev.IDSet && len(s.resumeID) == 0 {
			s.startAt(ev.ID)
		}
	case "resync":
		s.check(frameResync, ev.ID, ev.IDSet, ev.Data, now, ls)
	case gatewaytest.ExpiredType:
		s.check(frameExpired, ev.ID, ev.IDSet, ev.Data, now, ls)
	case "reauth":
	default:
		s.check(frameEvent, ev.ID, ev.IDSet, ev.Data, now, ls)
	}
}

// frameKind is what check accounts for.
type frameKind uint8

const (
	frameEvent   frameKind = iota + 1
	frameResync            // the stream continues after the frame's position
	frameExpired           // an event delivered as its expired marker
)

// check accounts for one event, resync or expired marker of either transport: id is
// the id in force (idSet: the frame carried it itself), data the envelope
// ({"room","epoch","seq","ts",…,"body"}, or {"room","epoch","seq"} for a marker; a
// WebSocket frame is one with its kind and id in front).
func (s *subscriber) check(kind frameKind, id []byte, idSet bool, data []byte, now time.Time, ls *loadState) {
	if kind == frameResync {
		s.handleResync(id, idSet, data)
		return
	}
	seq, ok := gatewaytest.UintAfter(data, keySeq)
	if !ok {
		s.noteMalformed()
		return
	}
	epoch, ok := epochOfID(id)
	if !idSet || !ok {
		epoch, _ = gatewaytest.StringAfter(data, keyEpoch)
	}
	s.resumeID = append(s.resumeID[:0], id...)
	s.accept(epoch, seq, kind == frameExpired, data, now, ls)
}

// startAt starts a subscriber that has seen nothing yet at pos, where its first
// connection joined the room (an SSE stream's anchor, a WebSocket welcome): it
// resumes from there, so a connection that ends before its first event loses
// nothing, and its first event must be the seq after pos.
func (s *subscriber) startAt(pos []byte) {
	if !plainID(pos) {
		return
	}
	seq, err := strconv.ParseUint(string(pos[bytes.LastIndexByte(pos, ':')+1:]), 10, 64)
	if err != nil {
		return
	}
	s.resumeID = append(s.resumeID[:0], pos...)
	s.track.ExpectFirst(seq + 1)
}

// accept accounts for one delivered event: its seq, and its latency from the send
// time in data. An expired marker is delivered too (the tracker counts it as
// expired, not lost); it has no send time.
func (s *subscriber) accept(epoch []byte, seq uint64, expired bool, data []byte, now time.Time, ls *loadState) {
	observe := s.track.Observe
	if expired {
		observe = s.track.ObserveExpired
	}
	if v := observe(epoch, seq); v != gatewaytest.InOrder {
		s.anomalies.Store(s.anomalies.Load() + 1)
		if s.firstBad.verdict == 0 {
			s.firstBad = anomaly{verdict: v, seq: seq, at: now}
		}
	}
	if !expired {
		if ts, ok := gatewaytest.UintAfter(data, keyTS); ok {
			if w := now.UnixNano() - int64(ts)*int64(time.Millisecond); w > s.maxWait.Load() {
				s.maxWait.Store(w)
			}
		}
	}
	s.deliveries.Store(s.deliveries.Load() + 1)
	if s.hist != nil && ls.measuring.Load() && !expired {
		if t, ok := gatewaytest.UintAfter(data, keyT); ok {
			s.hist.record(now.Sub(time.Unix(0, int64(t))))
		}
	}
	if seq > s.lastSeq.Load() {
		s.lastSeq.Store(seq)
	}
	s.checkCaughtUp(ls)
}

// anomaly is an event the tracker did not take in order: what it was, its seq and
// when it arrived.
type anomaly struct {
	verdict gatewaytest.Verdict
	seq     uint64
	at      time.Time
}

// noteMalformed counts an event that could not be accounted for.
func (s *subscriber) noteMalformed() {
	s.malformed++
	s.anomalies.Store(s.anomalies.Load() + 1)
}

// undelivered returns how many acknowledged seqs of its room the subscriber still
// lacked when the run ended: events lost at the tail, which no later seq exposed as
// a gap. Subscribers that never connected or were refused are counted elsewhere.
// Call it once the subscriber's goroutine has returned.
func (s *subscriber) undelivered() uint64 {
	if !s.connected || s.fatal != nil {
		return 0
	}
	target, last := s.room.target.Load(), s.lastSeq.Load()
	if target <= last {
		return 0
	}
	// A room's seqs may start above 0 (history from before the run): never count
	// more than the run published to it.
	return min(target-last, uint64(s.room.published.Load()))
}

// countingReader counts the bytes read through it into n; one goroutine reads.
type countingReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Store(c.n.Load() + uint64(k))
	return k, err
}

// storeLast moves the position the settle phase compares with the room's target.
func (s *subscriber) storeLast(seq uint64) { s.lastSeq.Store(seq) }

// handleResync restarts the seq accounting where the server says the stream goes on.
func (s *subscriber) handleResync(id []byte, idSet bool, data []byte) {
	epoch, _ := gatewaytest.StringAfter(data, keyEpoch)
	seq, _ := gatewaytest.UintAfter(data, keySeq)
	s.track.Resync(epoch, seq)
	s.lastSeq.Store(seq)
	if idSet {
		s.resumeID = append(s.resumeID[:0], id...)
		return
	}
	// Without an id on the resync frame, resuming from the old id would only earn
	// another resync: resume from the position the frame announced.
	s.resumeID = append(s.resumeID[:0], epoch...)
	s.resumeID = append(s.resumeID, ':')
	s.resumeID = strconv.AppendUint(s.resumeID, seq, 10)
}

// checkCaughtUp reports the subscriber once it has everything its room's publishers
// had acknowledged when publishing stopped.
func (s *subscriber) checkCaughtUp(ls *loadState) {
	if !s.room.final.Load() || s.caughtUp.Load() {
		return
	}
	if s.lastSeq.Load() >= s.room.target.Load() && s.caughtUp.CompareAndSwap(false, true) {
		ls.markCaughtUp()
	}
}

// epochOfID returns the epoch part of an "<epoch>:<seq>" id.
func epochOfID(id []byte) ([]byte, bool) {
	i := bytes.LastIndexByte(id, ':')
	if i < 0 {
		return nil, false
	}
	return id[:i], true
}
