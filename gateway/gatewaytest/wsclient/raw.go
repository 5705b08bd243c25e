package wsclient

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gobwas/ws"
)

// Raw is a WebSocket connection whose frames the caller makes byte by byte: split
// over many writes, unmasked, fragmented around a control frame, longer than the
// server takes. It is for testing a server's framing, where Conn (a conforming
// library) would refuse to send what the test needs.
type Raw struct {
	nc net.Conn
	br *bufio.Reader
}

// DialRaw upgrades GET /ws at url (see URL; ws:// only) over a plain TCP
// connection, sending header with the handshake.
func DialRaw(ctx context.Context, wsURL string, header http.Header) (*Raw, error) {
	u, err := url.Parse(wsURL)
	if err != nil || u.Scheme != "ws" {
		return nil, fmt.Errorf("wsclient: raw dial %s: a ws:// URL is needed", wsURL)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("wsclient: raw dial %s: %w", u.Host, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{}}
	for name, vs := range header {
		req.Header[name] = vs
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", key)
	if err := req.Write(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("wsclient: raw handshake: %w", err)
	}
	br := bufio.NewReader(nc)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("wsclient: raw handshake: %w", err)
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		nc.Close()
		return nil, fmt.Errorf("wsclient: raw handshake: %s", res.Status)
	}
	_ = nc.SetDeadline(time.Time{})
	return &Raw{nc: nc, br: br}, nil
}

// ClientFrame returns a client frame: its header, masked (as every client frame must
// be) unless unmasked, and its payload.
func ClientFrame(op ws.OpCode, fin bool, payload []byte, unmasked bool) []byte {
	b0 := byte(op)
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	var maskBit byte = 0x80
	if unmasked {
		maskBit = 0
	}
	switch n := len(payload); {
	case n <= 125:
		b = append(b, maskBit|byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, maskBit|126), uint16(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, maskBit|127), uint64(n))
	}
	if unmasked {
		return append(b, payload...)
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i&3])
	}
	return b
}

// Text returns a whole masked text frame of payload.
func Text(payload string) []byte { return ClientFrame(ws.OpText, true, []byte(payload), false) }

// Write writes b as it is, in one write.
func (r *Raw) Write(b []byte) error {
	_, err := r.nc.Write(b)
	return err
}

// RawFrame is a server frame as Raw reads it.
type RawFrame struct {
	Op      ws.OpCode
	Payload []byte
}

// Read reads the server's next frame, within d (server frames are unmasked and,
// from the gateway, never fragmented).
func (r *Raw) Read(d time.Duration) (RawFrame, error) {
	op, p, err := r.read(d)
	return RawFrame{Op: op, Payload: p}, err
}

func (r *Raw) read(d time.Duration) (op ws.OpCode, payload []byte, err error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(d))
	var h [2]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 {
		return 0, nil, errors.New("wsclient: the server sent a masked frame")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(r.br, l[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(r.br, l[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	if n > DefaultReadLimit {
		return 0, nil, fmt.Errorf("wsclient: a server frame of %d bytes", n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r.br, payload); err != nil {
		return 0, nil, err
	}
	return ws.OpCode(h[0] & 0x0f), payload, nil
}

// CloseCode reads frames, within d for each, until the server's close, and returns
// its code (0 for a close without one) and the frames that came before it.
func (r *Raw) CloseCode(d time.Duration) (code int, before []RawFrame, err error) {
	for {
		f, err := r.Read(d)
		if err != nil {
			return -1, before, err
		}
		if f.Op != ws.OpClose {
			before = append(before, f)
			continue
		}
		if len(f.Payload) >= 2 {
			code = int(binary.BigEndian.Uint16(f.Payload))
		}
		return code, before, nil
	}
}

// Close closes the connection without a close handshake.
func (r *Raw) Close() error { return r.nc.Close() }
