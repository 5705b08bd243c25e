package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// The WebSocket protocol's frames: every message is one JSON object with the
// protocol version "v" (1) and the frame's "kind". Unknown fields are ignored; an
// unknown kind is answered with an error frame and the connection stays open.

// wsVersion is the protocol version every frame carries.
const wsVersion = 1

// The kinds of frames.
const (
	wsHello     = "hello"
	wsWelcome   = "welcome"
	wsEvent     = "event"
	wsResync    = "resync"
	wsAck       = "ack"
	wsPublish   = "publish"
	wsPublished = "published"
	wsPing      = "ping"
	wsPong      = "pong"
	wsError     = "error"
)

// Bounds of what a client sends.
const (
	maxRefLen   = 128
	maxAgentLen = 64
	maxPingData = 1 << 10
)

// wsFrame is a decoded client frame: the fields of every kind it may be.
type wsFrame struct {
	V    int    `json:"v"`
	Kind string `json:"kind"`

	// hello
	Client string            `json:"client"`
	Boot   string            `json:"boot"`
	Rooms  map[string]string `json:"rooms"`
	Agent  string            `json:"agent"`

	// ack and publish
	Room string `json:"room"`
	// ack
	ID string `json:"id"`
	// publish
	Type           string          `json:"type"`
	Body           json.RawMessage `json:"body"`
	IdempotencyKey string          `json:"idempotency_key"`
	Ref            string          `json:"ref"`
	TTL            json.RawMessage `json:"ttl"`             // as Event-TTL: "30s", or whole seconds
	WaitFor        string          `json:"wait_for"`        // "ack": wait for a receipt (receipts_publish.go)
	WaitTimeoutMS  int64           `json:"wait_timeout_ms"` // 0: DefaultReceiptWait

	// ping
	Data json.RawMessage `json:"data"`
}

// errWSFrame is why a message is not a frame at all.
var errWSFrame = errors.New("a frame is one JSON object with \"v\":1 and a \"kind\"")

// errWSVersion is why a frame of another protocol version (or none) is refused:
// after the hello it closes the connection with 4400, as a bad hello does.
var errWSVersion = errors.New("unsupported protocol version")

// decodeWSFrame decodes one client message. It refuses anything but one JSON object
// of version 1 with a kind; the kind itself is not checked here.
func decodeWSFrame(p []byte) (wsFrame, error) {
	var f wsFrame
	p = bytes.TrimSpace(p)
	if len(p) == 0 || p[0] != '{' {
		return f, errWSFrame
	}
	if err := json.Unmarshal(p, &f); err != nil {
		return wsFrame{}, errWSFrame
	}
	if f.V != wsVersion {
		return wsFrame{}, fmt.Errorf("%w %d: this gateway speaks \"v\":1", errWSVersion, f.V)
	}
	if f.Kind == "" {
		return wsFrame{}, errWSFrame
	}
	return f, nil
}

// hello is a validated hello: the client, its boot and its rooms, sorted, each with
// where it resumes from.
type hello struct {
	client, boot string
	agent        string // the client's version, "" when the hello names none
	names        []string
	from         []replay.Position
	resumed      []bool
}

// parseHello validates a hello frame, whose boot must not be from after latestBoot;
// the error is the close reason's text.
func parseHello(f wsFrame, maxRooms int, latestBoot time.Time) (hello, error) {
	if f.Kind != wsHello {
		return hello{}, errors.New("the first frame must be a hello")
	}
	if !replay.ValidClient(f.Client) {
		return hello{}, errors.New("client: 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -")
	}
	boot, ok := parseBoot(f.Boot)
	if !ok {
		return hello{}, errors.New("boot: a UUIDv7 in its canonical form")
	}
	if replay.BootTime(boot).After(latestBoot) {
		return hello{}, errors.New("boot: its time is ahead of the gateway's clock by more than " + wsBootSkew.String())
	}
	if !validAgent(f.Agent) {
		return hello{}, errors.New("agent: at most 64 printable ASCII characters")
	}
	if len(f.Rooms) == 0 {
		return hello{}, errors.New("rooms: name at least one room")
	}
	if len(f.Rooms) > maxRooms {
		return hello{}, fmt.Errorf("rooms: at most %d", maxRooms)
	}
	h := hello{client: f.Client, boot: boot, agent: f.Agent, names: make([]string, 0, len(f.Rooms))}
	for name := range f.Rooms {
		if !replay.ValidRoom(name) {
			return hello{}, errors.New("rooms: a room name is 1 to 128 characters of A-Z a-z 0-9 . _ ~ -")
		}
		h.names = append(h.names, name)
	}
	slices.Sort(h.names)
	h.from, h.resumed = make([]replay.Position, len(h.names)), make([]bool, len(h.names))
	for i, name := range h.names {
		v := f.Rooms[name]
		if v == "" {
			continue
		}
		pos, err := replay.ParsePosition(v)
		if err != nil {
			return hello{}, errors.New("rooms: a resume id is <epoch>:<seq>, <seq> or empty")
		}
		h.from[i], h.resumed[i] = pos, true
	}
	return h, nil
}

// parseBoot validates a boot id, a UUIDv7 in canonical form (8-4-4-4-12 hex digits,
// version 7, variant 10xx), and returns it in lower case, so that boots compare in
// the order they were made.
func parseBoot(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	if b[14] != '7' || !strings.ContainsRune("89ab", rune(b[19])) {
		return "", false
	}
	return string(b), true
}

// validRef accepts a publish reference of up to 128 printable ASCII characters.
func validRef(ref string) bool { return isPrintableASCII(ref, maxRefLen) }

// validAgent accepts a hello's agent, the client's version: up to 64 printable
// ASCII characters (none: the hello names no version).
func validAgent(agent string) bool { return isPrintableASCII(agent, maxAgentLen) }

// isPrintableASCII reports whether s is at most n printable ASCII characters.
func isPrintableASCII(s string, n int) bool {
	if len(s) > n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// appendWSHead appends the start of a server frame: {"v":1,"kind":"<kind>".
func appendWSHead(dst []byte, kind string) []byte {
	dst = append(dst, `{"v":1,"kind":"`...)
	dst = append(dst, kind...)
	return append(dst, '"')
}

// wsEventFrame encodes ev as its event frame, in one allocation: the envelope's
// fields (replay.Event.AppendJSON) and the id,
// {"v":1,"kind":"event","id":"<epoch>:<seq>","room",…,"body"}.
func wsEventFrame(ev replay.Event) []byte {
	b := appendWSHead(make([]byte, 0, len(ev.Body)+len(ev.Room)+2*len(ev.Epoch)+len(ev.Type)+160), wsEvent)
	b = appendWSID(b, ev.Position())
	// The envelope's fields follow, without its opening brace.
	n := len(b)
	b = ev.AppendJSON(b)
	return append(b[:n], b[n+1:]...)
}

// appendWSID appends a position frame's `,"id":"<epoch>:<seq>",` after its head;
// the fields of a JSON object follow, written by the caller without its opening
// brace (events and expired markers alike).
func appendWSID(dst []byte, pos replay.Position) []byte {
	dst = append(dst, `,"id":"`...)
	dst = append(dst, pos.Epoch...)
	dst = append(dst, ':')
	dst = strconv.AppendUint(dst, pos.Seq, 10)
	return append(dst, '"', ',')
}

// appendWSResync appends a resync frame: the room's history between the client's
// position and {epoch, seq} is lost; it continues after that. A fork adds
// "fork":true, as on SSE.
func appendWSResync(dst []byte, room string, at replay.Position, fork bool) []byte {
	dst = appendWSHead(dst, wsResync)
	dst = append(dst, `,"room":"`...)
	dst = append(dst, room...)
	dst = append(dst, `","id":"`...)
	dst = append(dst, at.String()...)
	dst = append(dst, `","epoch":"`...)
	dst = append(dst, at.Epoch...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, at.Seq, 10)
	if fork {
		dst = append(dst, `,"fork":true`...)
	}
	return append(dst, '}')
}

// wsJSON encodes a control frame (welcome, published, error, pong).
func wsJSON(v any) []byte {
	b, err := marshalJSON(v)
	if err != nil {
		// Only our own types reach here; they always encode.
		panic(err)
	}
	return b
}

type wsWelcomeFrame struct {
	V       int               `json:"v"`
	Kind    string            `json:"kind"`
	Session string            `json:"session"`
	Rooms   map[string]string `json:"rooms"`
}

type wsPublishedFrame struct {
	V     int    `json:"v"`
	Kind  string `json:"kind"`
	Ref   string `json:"ref,omitempty"`
	Room  string `json:"room"`
	ID    string `json:"id"`
	Epoch string `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

type wsErrorFrame struct {
	V       int    `json:"v"`
	Kind    string `json:"kind"`
	Ref     string `json:"ref,omitempty"`
	Room    string `json:"room,omitempty"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

type wsPongFrame struct {
	V    int             `json:"v"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data,omitempty"`
}

func wsErrorOf(ref, room string, e *apiError) []byte {
	return wsJSON(wsErrorFrame{V: wsVersion, Kind: wsError, Ref: ref, Room: room, Error: e.Code, Message: e.Message})
}
