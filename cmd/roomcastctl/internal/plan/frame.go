package plan

import (
	"strconv"
	"strings"

	"github.com/roomcast/roomcast/replay/wire"
)

// The sample event whose encodings size frames and doorbells: a seq of 6 digits, a
// publish time of 13 (Unix milliseconds, 2001 to 2286), an epoch of 8 characters as
// every log draws them, and the default event type (no event: line).
const (
	SampleSeq   = 100000
	sampleTS    = 1_760_000_000_000
	sampleEpoch = "k3x9q0ab"
)

// sampleBody is compact JSON of exactly n bytes (n >= 1): a string, or a digit.
func sampleBody(n int) []byte {
	if n < 2 {
		return []byte("0")
	}
	b := make([]byte, n)
	b[0], b[n-1] = '"', '"'
	for i := 1; i < n-1; i++ {
		b[i] = 'x'
	}
	return b
}

func sampleRoom(n int) string { return strings.Repeat("r", n) }

// FrameBytes is the size of the SSE frame the gateway writes for an event of a
// payload-byte body in a room of a roomLen-character name at seq: the frame is
// encoded by wire.EventFrame, so it counts the id, the envelope and the framing
// as a client reads them (HTTP chunking and TLS come on top).
func FrameBytes(payload, roomLen int, seq uint64) int {
	ev := wire.Event{
		Room:  sampleRoom(roomLen),
		Epoch: sampleEpoch,
		Seq:   seq,
		TS:    sampleTS,
		Type:  wire.DefaultType,
		Body:  sampleBody(payload),
	}
	return len(wire.EventFrame(ev))
}

// DoorbellBytes is the size of one doorbell push a Redis primary sends a pod: the
// RESP3 push ["smessage", channel, message] (RESP2 has the same size) for the
// channel room:{<room>} and the message the publish function builds (roomcast.lua):
// "<epoch> <seq> <ts> <type>\n<body>", the type empty for the default.
func DoorbellBytes(payload, roomLen int, seq uint64) int {
	channel := len("room:{") + roomLen + len("}")
	msg := len(sampleEpoch) + 1 + len(strconv.FormatUint(seq, 10)) + 1 +
		len(strconv.FormatInt(sampleTS, 10)) + 1 + 0 + 1 + len(sampleBody(payload))
	return len(">3\r\n") + bulkBytes(len("smessage")) + bulkBytes(channel) + bulkBytes(msg)
}

// bulkBytes is the size of a RESP bulk string of n bytes: $<n>\r\n<data>\r\n.
func bulkBytes(n int) int { return 1 + len(strconv.Itoa(n)) + 2 + n + 2 }
