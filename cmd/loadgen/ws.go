package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
	"github.com/roomcast/roomcast/replay/wire"
)

// WebSocket subscribers (-ws-share): a share of the subscribers hold one GET /ws
// connection each instead of an SSE stream, with one room, as gateway/README.md's "WebSocket
// for agents" describes: a hello naming the subscriber's client id, the process's
// boot and the room with its resume id, a welcome, then event and resync frames,
// which go through the same check as SSE events (subscriber.check), and an ack of
// the last event processed every wsAckEvery events or wsAckInterval. A close with
// 1001, 1012 or 1013, or a broken connection, reconnects with the same client id
// and boot and resumes from the last id, after the delay an SSE subscriber waits
// before the server's retry: hint; a close with 4400–4499 (bad hello, unauthorized,
// forbidden, silent, superseded) or a refused upgrade other than 429 and 5xx stops
// the subscriber, as a 4xx answer stops an SSE one.

// processBoot is the boot every hello of this process carries: a UUIDv7 made once
// per process start.
var processBoot = wire.NewBoot(time.Now())

// Acknowledgements: after this many events, or once this long has passed since
// the last ack when an event arrives.
const (
	wsAckEvery    = 32
	wsAckInterval = time.Second
)

// wsWriteTimeout bounds one write (the hello, an ack).
const wsWriteTimeout = 10 * time.Second

// wsDialTimeout bounds the upgrade.
const wsDialTimeout = 10 * time.Second

// wsReadSlack is what a frame may add to a published body; the read limit is the
// body size plus this, and never below wsMinReadLimit.
const (
	wsReadSlack    = 64 << 10
	wsMinReadLimit = 1 << 20
)

var (
	keyKind = []byte(`"kind":"`)
	keyID   = []byte(`"id":"`)
)

// wsState is what a WebSocket subscriber keeps across its connections; its
// goroutine owns it.
type wsState struct {
	client  string
	hello   map[string]string // the hello's rooms: the one room and its resume id
	joinKey []byte            // <room>:" : the room's position in a welcome
	pending int               // events processed since the last ack
	// ackInterval is wsAckInterval; tests lengthen it to count acks by events alone.
	ackInterval time.Duration
	// refusedAcks counts the error frames the server answered acks with.
	refusedAcks uint64
	ackedAt     time.Time
}

// newWSState prepares subscriber id's WebSocket side in run runID.
func newWSState(runID string, id int, room string) *wsState {
	quoted, _ := json.Marshal(room) // a string always encodes
	return &wsState{
		client:      fmt.Sprintf("anon:loadgen-%s-%d", runID, id),
		hello:       map[string]string{room: ""},
		joinKey:     append(quoted, `:"`...),
		ackInterval: wsAckInterval,
	}
}

// newRunID returns 8 hex digits naming one run, so that the client ids of two runs
// against the same fleet never collide.
func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// wsMember reports whether subscriber i connects over WebSocket: within each room
// (subscriber i is member i/Rooms of room i%Rooms), the members whose running share
// crosses a whole number, so every room gets floor(members × share) of them, spread
// over its members in the order they connect.
func (c *Config) wsMember(i int) bool {
	if c.WSShare <= 0 || c.Rooms < 1 {
		return false
	}
	k := float64(i / c.Rooms)
	// The epsilon keeps a product such as 0.29 × 100 = 28.999… on its whole number.
	const eps = 1e-9
	return math.Floor((k+1)*c.WSShare+eps) > math.Floor(k*c.WSShare+eps)
}

// streamWS holds one WebSocket connection; it returns nil when ctx ends it.
func (s *subscriber) streamWS(ctx context.Context, ls *loadState) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pod := ls.pods.pickStream(s.id, s.connected)
	conn, err := s.dialWS(ctx, ls, ls.pods.url(pod, "/ws", ls.cfg.URL+"/ws"))
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	w := s.ws
	w.hello[s.room.name] = string(s.resumeID)
	if err := s.writeWS(ctx, func(ctx context.Context) error { return conn.Hello(ctx, w.client, processBoot, w.hello) }); err != nil {
		return err
	}
	opened := false
	defer func() {
		if opened {
			ls.streamClosed(s)
		}
	}()
	for {
		data, err := s.readWS(ctx, conn)
		if err != nil {
			return s.wsEnded(ctx, err)
		}
		now := time.Now()
		kind, _ := gatewaytest.StringAfter(data, keyKind)
		switch string(kind) {
		case wsclient.KindWelcome:
			if !opened {
				opened = true
				w.ackedAt = now // the first ack comes wsAckInterval or wsAckEvery events in
				if len(s.resumeID) == 0 {
					s.joined(data)
				}
				ls.streamOpened(s, pod, cancel) // before counted, as an SSE stream
				s.established(ls)
			}
		case wsclient.KindEvent, wsclient.KindResync, wsclient.KindExpired:
			if !opened {
				s.noteMalformed() // the protocol says welcome first
				continue
			}
			id, ok := gatewaytest.StringAfter(data, keyID)
			fk := frameEvent
			switch string(kind) {
			case wsclient.KindResync:
				fk = frameResync
			case wsclient.KindExpired:
				fk = frameExpired
			}
			s.check(fk, id, ok, data, now, ls)
			if fk != frameResync && ok {
				if err := s.ackWS(ctx, conn, now); err != nil {
					return err
				}
			}
		case wsclient.KindError:
			// Only an ack can be refused (invalid_ack): counted, not a loss. A
			// gateway that records what it sent only after the write may refuse an
			// ack of the event it has just written.
			w.refusedAcks++
		default:
			// pong, published: never asked for.
		}
	}
}

// joined reads, from the welcome of a subscriber that has seen nothing yet, the
// position its connection joined the room at, and starts there (startAt).
func (s *subscriber) joined(welcome []byte) {
	if pos, ok := gatewaytest.StringAfter(welcome, s.ws.joinKey); ok {
		s.startAt(pos)
	}
}

// dialWS upgrades GET /ws at target. A refusal that can never succeed (a 4xx
// other than 429) is fatal.
func (s *subscriber) dialWS(ctx context.Context, ls *loadState, target string) (*wsclient.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, wsDialTimeout)
	defer cancel()
	conn, resp, err := wsclient.Dial(dctx, target, wsclient.Options{
		HTTPClient: ls.subClient,
		ReadLimit:  int64(max(wsMinReadLimit, ls.cfg.BodySize+wsReadSlack)),
	})
	if err != nil {
		ls.connectErrors.Add(1)
		if resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return nil, fmt.Errorf("%w: ws %s: status %d", errFatal, s.room.name, resp.StatusCode)
		}
		return nil, fmt.Errorf("ws %s: %w", s.room.name, err)
	}
	return conn, nil
}

// readWS reads one message, valid until the next read, and counts its bytes; a
// binary message reads as nil (no kind: ignored).
func (s *subscriber) readWS(ctx context.Context, conn *wsclient.Conn) ([]byte, error) {
	data, n, err := conn.ReadRaw(ctx)
	if err != nil {
		return nil, err
	}
	s.bytes.Store(s.bytes.Load() + uint64(n))
	return data, nil
}

// wsEnded says what the end of a connection means: nil when ctx ended it, fatal
// for a 44xx close, else an error after which the subscriber reconnects.
func (s *subscriber) wsEnded(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if code, reason := wsclient.CloseOf(err); code >= 4400 && code < 4500 {
		return fmt.Errorf("%w: ws %s: closed with %d %q", errFatal, s.room.name, int(code), reason)
	}
	return fmt.Errorf("ws %s: %w", s.room.name, err)
}

// ackWS counts one processed event and acknowledges the last one every wsAckEvery
// events, or when wsAckInterval has passed since the last ack.
func (s *subscriber) ackWS(ctx context.Context, conn *wsclient.Conn, now time.Time) error {
	w := s.ws
	w.pending++
	if w.pending < wsAckEvery && now.Sub(w.ackedAt) < w.ackInterval {
		return nil
	}
	if !plainID(s.resumeID) {
		return nil // never from this server; nothing a JSON string could carry as is
	}
	w.pending, w.ackedAt = 0, now
	return s.writeWS(ctx, func(ctx context.Context) error { return conn.Ack(ctx, s.room.name, string(s.resumeID)) })
}

// writeWS runs one write (a hello, an ack) within wsWriteTimeout.
func (s *subscriber) writeWS(ctx context.Context, write func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	if err := write(ctx); err != nil {
		return fmt.Errorf("ws %s: %w", s.room.name, err)
	}
	return nil
}

// plainID reports whether id is printable ASCII without a quote or backslash.
func plainID(id []byte) bool {
	for _, c := range id {
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return len(id) > 0
}
