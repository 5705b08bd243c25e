package wsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// Version is the protocol version every frame carries ("v").
const Version = 1

// The kinds of frames ("kind").
const (
	KindHello     = "hello"
	KindWelcome   = "welcome"
	KindEvent     = "event"
	KindResync    = "resync"
	KindAck       = "ack"
	KindPublish   = "publish"
	KindPublished = "published"
	KindPing      = "ping"
	KindPong      = "pong"
	KindError     = "error"
	// KindExpired stands for an event whose deadline passed before it was
	// delivered: its id, room, epoch and seq, no body.
	KindExpired = "expired"
)

// Frame is a decoded server frame: the fields of every kind. An event frame
// carries the SSE envelope's fields (room, epoch, seq, ts, type, body) and its id.
type Frame struct {
	V       int               `json:"v"`
	Kind    string            `json:"kind"`
	Session string            `json:"session"` // welcome
	Rooms   map[string]string `json:"rooms"`   // welcome: room → the position it joined at
	Room    string            `json:"room"`
	ID      string            `json:"id"` // event, resync, published: <epoch>:<seq>
	Epoch   string            `json:"epoch"`
	Seq     uint64            `json:"seq"`
	TS      int64             `json:"ts"`
	Type    string            `json:"type"`
	Body    json.RawMessage   `json:"body"`
	Fork    bool              `json:"fork"` // resync: the history forked
	Ref     string            `json:"ref"`  // published, error: the publish's ref
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Data    json.RawMessage   `json:"data"` // pong
	// published, of a publish that waited for a receipt: "acked" (AckedAt) or
	// "unresponsive" (the client's status).
	Receipt            string `json:"receipt"`
	Client             string `json:"client"`
	AckedAt            string `json:"acked_at"`
	Connected          bool   `json:"connected"`
	LastAck            string `json:"last_ack"`
	LastAckAt          string `json:"last_ack_at"`
	OldestUnackedAgeMS int64  `json:"oldest_unacked_age_ms"`
}

// DefaultReadLimit bounds one server message unless Options.ReadLimit says
// otherwise.
const DefaultReadLimit = 1 << 20

// Options configure Dial; the zero value dials with http.DefaultClient, no extra
// header, no compression and DefaultReadLimit.
type Options struct {
	Header     http.Header  // sent with the upgrade (Authorization, Origin)
	HTTPClient *http.Client // nil: http.DefaultClient
	ReadLimit  int64        // bytes of one server message; 0: DefaultReadLimit
	// OnPing, when set, is called for every WebSocket ping the server sends, before
	// the pong is answered.
	OnPing func()
	// Agent, when set, is the client's version, sent as the hello's agent (at most
	// 64 printable ASCII characters).
	Agent string
}

// URL returns the WebSocket endpoint of a gateway whose public listener is base
// (http://host:port or https://…): ws://host:port/ws.
func URL(base string) string {
	return "ws" + strings.TrimPrefix(strings.TrimRight(base, "/"), "http") + "/ws"
}

// Conn is one WebSocket connection to a gateway.
type Conn struct {
	ws    *websocket.Conn
	in    bytes.Buffer // the message being read (ReadRaw)
	out   []byte       // the frame being written (Ack)
	agent string       // the hello's agent; "" sends none
}

// Dial upgrades GET /ws at url (see URL). When the server refuses the upgrade, the
// error comes with its response (its body is closed), whose status says why.
func Dial(ctx context.Context, url string, o Options) (*Conn, *http.Response, error) {
	opts := &websocket.DialOptions{HTTPClient: o.HTTPClient, HTTPHeader: o.Header, CompressionMode: websocket.CompressionDisabled}
	if o.OnPing != nil {
		opts.OnPingReceived = func(context.Context, []byte) bool { o.OnPing(); return true }
	}
	ws, res, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, res, fmt.Errorf("wsclient: dial %s: %w", url, err)
	}
	limit := o.ReadLimit
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	ws.SetReadLimit(limit)
	return &Conn{ws: ws, agent: o.Agent}, res, nil
}

// WS returns the underlying connection, for what this package does not cover.
func (c *Conn) WS() *websocket.Conn { return c.ws }

// Close sends a close frame with code and reason and waits for the server's.
func (c *Conn) Close(code websocket.StatusCode, reason string) error {
	return c.ws.Close(code, reason)
}

// CloseNow closes the connection without a close handshake.
func (c *Conn) CloseNow() error { return c.ws.CloseNow() }

// Write sends one text message as is: a frame already encoded, or bytes that are
// not a frame at all.
func (c *Conn) Write(ctx context.Context, msg []byte) error {
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("wsclient: write: %w", err)
	}
	return nil
}

// Send encodes v as JSON and sends it.
func (c *Conn) Send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("wsclient: encode: %w", err)
	}
	return c.Write(ctx, b)
}

// Hello sends the hello: the client id, its process's boot (replay/wire.NewBoot) and the
// rooms, each with the id to resume after ("" for from now).
func (c *Conn) Hello(ctx context.Context, client, boot string, rooms map[string]string) error {
	f := map[string]any{"v": Version, "kind": KindHello, "client": client, "boot": boot, "rooms": rooms}
	if c.agent != "" {
		f["agent"] = c.agent
	}
	return c.Send(ctx, f)
}

// Ack acknowledges the events of room up to and including id. It encodes the frame
// without allocating once its buffer has grown, for room names and ids as the
// gateway sends them.
func (c *Conn) Ack(ctx context.Context, room, id string) error {
	if !plain(room) || !plain(id) {
		return c.Send(ctx, map[string]any{"v": Version, "kind": KindAck, "room": room, "id": id})
	}
	b := append(c.out[:0], `{"v":1,"kind":"ack","room":"`...)
	b = append(b, room...)
	b = append(b, `","id":"`...)
	b = append(b, id...)
	c.out = append(b, `"}`...)
	return c.Write(ctx, c.out)
}

// Publish is a publish frame's content.
type Publish struct {
	Room           string `json:"room"`
	Type           string `json:"type,omitempty"`
	Body           any    `json:"body"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Ref            string `json:"ref,omitempty"` // echoed in the published or error answer
	TTL            string `json:"ttl,omitempty"` // the event's time to live, as Event-TTL: "30s", "90"
	// WaitFor "ack" waits for the receipt of a publish to a client's inbox, up to
	// WaitTimeoutMS (0: the server's default).
	WaitFor       string `json:"wait_for,omitempty"`
	WaitTimeoutMS int64  `json:"wait_timeout_ms,omitempty"`
}

// Publish sends a publish frame.
func (c *Conn) Publish(ctx context.Context, p Publish) error {
	return c.Send(ctx, struct {
		V    int    `json:"v"`
		Kind string `json:"kind"`
		Publish
	}{Version, KindPublish, p})
}

// Ping sends a protocol ping frame (answered by a pong frame with the same data);
// data nil sends none.
func (c *Conn) Ping(ctx context.Context, data json.RawMessage) error {
	return c.Send(ctx, struct {
		V    int             `json:"v"`
		Kind string          `json:"kind"`
		Data json.RawMessage `json:"data,omitempty"`
	}{Version, KindPing, data})
}

// ReadRaw reads the next message into the connection's buffer and returns it,
// valid until the next read, and its size on the wire. A binary message (never a
// frame) reads as nil with its size.
func (c *Conn) ReadRaw(ctx context.Context) ([]byte, int, error) {
	typ, r, err := c.ws.Reader(ctx)
	if err != nil {
		return nil, 0, err
	}
	c.in.Reset()
	if _, err := c.in.ReadFrom(r); err != nil {
		return nil, c.in.Len(), err
	}
	if typ != websocket.MessageText {
		return nil, c.in.Len(), nil
	}
	return c.in.Bytes(), c.in.Len(), nil
}

// Read reads and decodes the next frame. A message that is not a JSON object is
// an error wrapping ErrNotAFrame; the connection stays usable.
func (c *Conn) Read(ctx context.Context) (Frame, error) {
	p, _, err := c.ReadRaw(ctx)
	if err != nil {
		return Frame{}, err
	}
	return Decode(p)
}

// ErrNotAFrame: a server message that does not decode as a frame.
var ErrNotAFrame = errors.New("wsclient: not a frame")

// Decode decodes one server message.
func Decode(p []byte) (Frame, error) {
	var f Frame
	if err := json.Unmarshal(p, &f); err != nil {
		return Frame{}, fmt.Errorf("%w: %q: %w", ErrNotAFrame, p, err)
	}
	return f, nil
}

// CloseOf returns the close code and reason that ended a connection, from the error
// a read or write returned: -1 and "" when the connection broke without a close
// frame.
func CloseOf(err error) (websocket.StatusCode, string) {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code, ce.Reason
	}
	return -1, ""
}

// Retryable reports whether a connection that ended with code should connect again
// and resume: a broken connection (-1), a server going away (1001), a drain or
// restart (1012) and a slow consumer or a busy pod (1013). Every other code (4400 to
// 4499: a bad hello, a refused credential or grant, a silent client, a takeover) is
// for good.
func Retryable(code websocket.StatusCode) bool {
	switch code {
	case -1, websocket.StatusGoingAway, websocket.StatusServiceRestart, websocket.StatusTryAgainLater:
		return true
	}
	return false
}

// plain reports whether s can stand in a JSON string as is: printable ASCII without
// a quote or backslash, as room names and ids are.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
