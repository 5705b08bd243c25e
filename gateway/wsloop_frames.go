package gateway

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// The WebSocket framing (RFC 6455, section 5) of connections on the idle loop, where
// no library reads or writes for them: a parser that takes whatever bytes the socket
// gave, however they were split, and the server's frames, which go out unmasked.

// RFC 6455 close codes the parser answers with.
const (
	wsNormalClosure    = 1000
	wsProtocolError    = 1002
	wsInvalidPayload   = 1007
	wsMessageTooBig    = 1009
	wsMaxControlLength = 125
)

// wsViolation is a frame the parser refuses: the connection closes with code.
type wsViolation struct {
	code   int
	reason string
}

// wsParser reads a client's frames from the bytes its socket gave, in pieces of any
// size. It keeps bytes of its own only while a frame or a fragmented message is
// incomplete, so an idle connection holds no buffer.
type wsParser struct {
	limit int // the largest message, in bytes
	// part is what remains of the last bytes fed that is not a whole frame yet, or
	// the rest of them after the handler asked to stop.
	part []byte
	// msg is a fragmented message's payload so far, msgOp its opcode (0: none in
	// progress).
	msg   []byte
	msgOp ws.OpCode
}

// wsHandle receives a whole message (text or binary) or a control frame; its payload
// is valid only during the call. It returns false to stop the parser after this
// frame: the rest waits in part for the next feed.
type wsHandle func(op ws.OpCode, payload []byte) bool

// feed parses data (the parser may modify it: payloads are unmasked in place) and
// hands each whole message and control frame to fn, in order. It reports whether fn
// asked to stop, and a violation that ends the connection.
func (p *wsParser) feed(data []byte, fn wsHandle) (stopped bool, v *wsViolation) {
	if len(p.part) > 0 {
		p.part = append(p.part, data...)
		data = p.part
	}
	off := 0
	for off < len(data) {
		n, op, fin, payload, v := p.frame(data[off:])
		if v != nil {
			p.release()
			return false, v
		}
		if n == 0 {
			break
		}
		off += n
		ok, v := p.deliver(op, fin, payload, fn)
		if v != nil {
			p.release()
			return false, v
		}
		if !ok {
			stopped = true
			break
		}
	}
	p.keep(data[off:])
	return stopped, nil
}

// pending reports whether bytes wait in the parser for its next feed.
func (p *wsParser) pending() bool { return len(p.part) > 0 }

// keep holds rest for the next feed; the part's buffer is dropped once nothing
// waits in it.
func (p *wsParser) keep(rest []byte) {
	switch {
	case len(rest) == 0:
		p.part = nil
	case len(p.part) > 0 && &rest[0] == &p.part[len(p.part)-len(rest)]:
		// rest lies in part already: move it to the front.
		p.part = p.part[:copy(p.part, rest)]
	default:
		p.part = append([]byte(nil), rest...)
	}
}

// release drops what the parser holds.
func (p *wsParser) release() { p.part, p.msg, p.msgOp = nil, nil, 0 }

// frame parses the frame at the start of b: its length n (0: incomplete), opcode,
// FIN bit and unmasked payload.
func (p *wsParser) frame(b []byte) (n int, op ws.OpCode, fin bool, payload []byte, v *wsViolation) {
	if len(b) < 2 {
		return 0, 0, false, nil, nil
	}
	fin, op = b[0]&0x80 != 0, ws.OpCode(b[0]&0x0f)
	if b[0]&0x70 != 0 {
		return 0, 0, false, nil, &wsViolation{wsProtocolError, "reserved bits set without an extension"}
	}
	switch op {
	case ws.OpContinuation, ws.OpText, ws.OpBinary, ws.OpClose, ws.OpPing, ws.OpPong:
	default:
		return 0, 0, false, nil, &wsViolation{wsProtocolError, "unknown opcode"}
	}
	if b[1]&0x80 == 0 {
		return 0, 0, false, nil, &wsViolation{wsProtocolError, "client frames must be masked"}
	}
	length, hdr := uint64(b[1]&0x7f), 2
	switch length {
	case 126:
		if len(b) < 4 {
			return 0, 0, false, nil, nil
		}
		length, hdr = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return 0, 0, false, nil, nil
		}
		length, hdr = binary.BigEndian.Uint64(b[2:]), 10
		if length>>63 != 0 {
			return 0, 0, false, nil, &wsViolation{wsProtocolError, "frame length out of range"}
		}
	}
	if op >= ws.OpClose && (!fin || length > wsMaxControlLength) {
		return 0, 0, false, nil, &wsViolation{wsProtocolError, "control frames are whole and at most 125 bytes"}
	}
	if length > uint64(p.limit) || (op == ws.OpContinuation && uint64(len(p.msg))+length > uint64(p.limit)) {
		// Refused before its payload arrives: the limit bounds what the parser
		// holds, not only what it delivers.
		return 0, 0, false, nil, &wsViolation{wsMessageTooBig, "message too big"}
	}
	total := hdr + 4 + int(length)
	if len(b) < total {
		return 0, 0, false, nil, nil
	}
	mask := b[hdr : hdr+4]
	payload = b[hdr+4 : total]
	for i := range payload {
		payload[i] ^= mask[i&3]
	}
	return total, op, fin, payload, nil
}

// deliver hands a whole message or control frame to fn, gathering fragments.
func (p *wsParser) deliver(op ws.OpCode, fin bool, payload []byte, fn wsHandle) (bool, *wsViolation) {
	switch {
	case op >= ws.OpClose:
		if op == ws.OpClose {
			if v := checkClosePayload(payload); v != nil {
				return false, v
			}
		}
		return fn(op, payload), nil
	case op == ws.OpContinuation && p.msgOp == 0:
		return false, &wsViolation{wsProtocolError, "continuation frame without a message to continue"}
	case op != ws.OpContinuation && p.msgOp != 0:
		return false, &wsViolation{wsProtocolError, "a new message began before the last one ended"}
	case op != ws.OpContinuation && fin:
		return p.whole(op, payload, fn)
	case op != ws.OpContinuation:
		p.msgOp = op
		p.msg = append([]byte(nil), payload...)
		return true, nil
	}
	p.msg = append(p.msg, payload...)
	if !fin {
		return true, nil
	}
	op, msg := p.msgOp, p.msg
	p.msg, p.msgOp = nil, 0
	return p.whole(op, msg, fn)
}

// whole hands a whole message to fn; a text message must be UTF-8.
func (p *wsParser) whole(op ws.OpCode, msg []byte, fn wsHandle) (bool, *wsViolation) {
	if op == ws.OpText && !utf8.Valid(msg) {
		return false, &wsViolation{wsInvalidPayload, "text message is not valid UTF-8"}
	}
	return fn(op, msg), nil
}

// checkClosePayload validates a close frame's body: empty, or a code a peer may
// send followed by a UTF-8 reason.
func checkClosePayload(b []byte) *wsViolation {
	if len(b) == 0 {
		return nil
	}
	if len(b) == 1 {
		return &wsViolation{wsProtocolError, "close frame with a one-byte body"}
	}
	code := binary.BigEndian.Uint16(b)
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1011, code >= 3000 && code <= 4999:
	default:
		return &wsViolation{wsProtocolError, "close code a peer may not send"}
	}
	if !utf8.Valid(b[2:]) {
		return &wsViolation{wsInvalidPayload, "close reason is not valid UTF-8"}
	}
	return nil
}

// appendWSFrameHeader appends the header of an unmasked server frame of n bytes.
func appendWSFrameHeader(dst []byte, op ws.OpCode, n int) []byte {
	dst = append(dst, 0x80|byte(op))
	switch {
	case n <= 125:
		return append(dst, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, 126), uint16(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, 127), uint64(n))
}

// appendWSClose appends a whole close frame with code and reason (cut to the 123
// bytes a close frame holds); code 0 sends an empty body.
func appendWSClose(dst []byte, code int, reason string) []byte {
	if code == 0 {
		return appendWSFrameHeader(dst, ws.OpClose, 0)
	}
	if len(reason) > 123 {
		reason = reason[:123]
		for len(reason) > 0 && !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	dst = appendWSFrameHeader(dst, ws.OpClose, 2+len(reason))
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, reason...)
}
