package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/roomcast/roomcast/replay"
)

// typeError is the answer to an event type that replay.ValidType refused: a reserved
// name says so, anything else states the pattern.
func typeError(t string) *apiError {
	if replay.Reserved(t) {
		return errReservedType
	}
	return errBadType
}

// contentEncodingError refuses a body in any Content-Encoding but identity: the
// gateway does not decompress, and a compressed body would be published as is.
func contentEncodingError(r *http.Request) *apiError {
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, enc := range strings.Split(v, ",") {
			if enc = strings.TrimSpace(enc); enc != "" && !strings.EqualFold(enc, "identity") {
				return errContentEncoding
			}
		}
	}
	return nil
}

// encode turns a publish body into the envelope's body and applies the size rule:
// the body as subscribers receive it, encoded (a text body as a JSON string, quotes
// and escapes included), must fit the limit, not only the bytes sent. Compacting
// JSON never grows it; encoding text can, up to six times.
func encode(mediaType string, raw []byte, limit int64) (json.RawMessage, *apiError) {
	body, aerr := EncodeBody(mediaType, raw)
	if aerr != nil {
		return nil, aerr
	}
	if int64(len(body)) > limit {
		return nil, newError(http.StatusRequestEntityTooLarge, "payload_too_large",
			"the body exceeds "+strconv.FormatInt(limit, 10)+" bytes as encoded into the event (a text body counts as a JSON string, quotes and escapes included)")
	}
	return body, nil
}
