package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// Centrifugo's wire, as far as loadgen speaks it (-protocol centrifugo), so the same
// workloads run against a Centrifugo server next to roomcast:
//
//   - subscribe: GET /connection/uni_sse?cf_connect={"token":JWT}, the unidirectional
//     SSE transport; the connection token (HS256 with -token-secret-file) names the
//     room as a server-side channel. Every frame is one "data:" line of JSON: the
//     connect push first ({"connect":{…,"subs":{room:{epoch,offset,…}}}}), then
//     publications ({"channel":room,"pub":{"data":…,"offset":N}}) and pings ({}).
//     A channel's offset is dense when its namespace keeps history, so it is the seq
//     the loss tracker checks. A reconnect asks to recover from the last offset seen.
//   - publish: POST /api/publish {"channel":room,"data":body} with X-API-Key; the
//     answer's result.offset is the publication's seq.

// Wire protocols -protocol accepts.
const (
	protocolRoomcast   = "roomcast" // the gateway, and the yardstick hub
	protocolCentrifugo = "centrifugo"
)

// centrifugoTokenTTL is the lifetime of a connection token: far beyond any run.
const centrifugoTokenTTL = 24 * time.Hour

var (
	keyOffset  = []byte(`"offset":`)
	keyPub     = []byte(`"pub":`)
	keyError   = []byte(`"error":`)
	keyConnect = []byte(`{"connect":`)
)

// centrifugoToken returns the connection token of subscriber id: its own user, with
// room as its one server-side channel.
func centrifugoToken(secret []byte, id int, room string, now time.Time) (string, error) {
	claims := jwt.MapClaims{
		"sub":      "load" + strconv.Itoa(id),
		"channels": []string{room},
		"exp":      now.Add(centrifugoTokenTTL).Unix(),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("centrifugo: token for subscriber %d: %w", id, err)
	}
	return tok, nil
}

// centrifugoRecover asks for the publications after offset in epoch on reconnect.
type centrifugoRecover struct {
	Recover bool   `json:"recover"`
	Epoch   string `json:"epoch"`
	Offset  uint64 `json:"offset"`
}

// centrifugoConnect is the connect request carried in cf_connect.
type centrifugoConnect struct {
	Token string                       `json:"token"`
	Subs  map[string]centrifugoRecover `json:"subs,omitempty"`
}

// centrifugoStreamURL returns the uni_sse URL of subscriber s: on a reconnect it asks
// to recover its room from the last position it saw.
func (s *subscriber) centrifugoStreamURL() (string, error) {
	req := centrifugoConnect{Token: s.token}
	if s.epoch != nil {
		req.Subs = map[string]centrifugoRecover{
			s.room.name: {Recover: true, Epoch: string(s.epoch), Offset: s.track.Last()},
		}
	}
	b, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("centrifugo: connect request: %w", err)
	}
	return s.room.streamURL + "?cf_connect=" + url.QueryEscape(string(b)), nil
}

// centrifugoSub is one channel in a connect push.
type centrifugoSub struct {
	Epoch        string `json:"epoch"`
	Offset       uint64 `json:"offset"`
	Recoverable  bool   `json:"recoverable"`
	Recovered    bool   `json:"recovered"`
	Publications []struct {
		Data   json.RawMessage `json:"data"`
		Offset uint64          `json:"offset"`
	} `json:"publications"`
}

// handleCentrifugo accounts for one uni_sse frame.
func (s *subscriber) handleCentrifugo(ev gatewaytest.Event, now time.Time, ls *loadState) {
	data := ev.Data
	switch {
	case bytes.HasPrefix(data, keyConnect):
		s.centrifugoConnected(data, now, ls)
	case bytes.Contains(data, keyPub):
		// The offset follows the publication's data, which is loadgen's own body and
		// holds no "offset" key.
		seq, ok := gatewaytest.UintAfter(data, keyOffset)
		if !ok || s.epoch == nil {
			s.noteMalformed()
			return
		}
		s.accept(s.epoch, seq, false, data, now, ls)
	default:
		// Pings ({}), and pushes loadgen does not ask for.
	}
}

// centrifugoConnected reads the connect push: the first one says where the room
// stands, a later one whether the publications missed while away were recovered.
func (s *subscriber) centrifugoConnected(data []byte, now time.Time, ls *loadState) {
	var push struct {
		Connect struct {
			Subs map[string]centrifugoSub `json:"subs"`
		} `json:"connect"`
	}
	if err := json.Unmarshal(data, &push); err != nil {
		s.noteMalformed()
		return
	}
	sub, ok := push.Connect.Subs[s.room.name]
	if !ok || !sub.Recoverable {
		// Without history the offsets are not dense: nothing could be checked.
		s.noteMalformed()
		return
	}
	epoch := []byte(sub.Epoch)
	switch {
	case s.epoch == nil:
		s.track.ExpectFirst(sub.Offset + 1)
		s.storeLast(sub.Offset)
	case sub.Recovered:
		for _, p := range sub.Publications {
			s.accept(epoch, p.Offset, false, p.Data, now, ls)
		}
	default:
		s.track.Resync(epoch, sub.Offset)
		s.storeLast(sub.Offset)
	}
	s.epoch = epoch
	s.checkCaughtUp(ls)
}

// appendCentrifugoPublish appends a publish API request for room.
func (p *publishers) appendCentrifugoPublish(dst []byte, room string, now time.Time) []byte {
	dst = append(dst, `{"channel":`...)
	dst = strconv.AppendQuote(dst, room)
	dst = append(dst, `,"data":`...)
	dst = p.appendBody(dst, now)
	return append(dst, '}')
}

// centrifugoOffset reads the seq from a publish API answer; an answer carrying an
// error (Centrifugo answers 200 with an error object unless told otherwise) or no
// offset (a channel without history) is not an acknowledgement.
func centrifugoOffset(answer []byte) (uint64, bool) {
	if bytes.Contains(answer, keyError) {
		return 0, false
	}
	return gatewaytest.UintAfter(answer, keyOffset)
}
