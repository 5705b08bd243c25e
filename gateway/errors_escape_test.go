package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestErrorMessagesUnescaped: error answers, over HTTP, in a batch result and in a
// WebSocket error frame, say "<epoch>:<seq>" as written, not "\u003cepoch\u003e",
// and still decode to the same message.
func TestErrorMessagesUnescaped(t *testing.T) {
	rec := httptest.NewRecorder()
	writeError(rec, errBadLastEventID)
	frame := wsJSON(wsErrorFrame{V: 1, Kind: "error", Error: errBadAck.Code, Message: errBadAck.Message})
	batch := appendBatchResult(nil, &batchResult{Status: 400, Room: "a&b", Error: errBadLastEventID.Code, Message: errBadLastEventID.Message})
	for _, c := range []struct {
		name string
		body string
		want string
	}{
		{"HTTP error", rec.Body.String(), errBadLastEventID.Message},
		{"WebSocket error frame", string(frame), errBadAck.Message},
		{"batch result", string(batch), errBadLastEventID.Message},
	} {
		if strings.Contains(c.body, `\u00`) || !strings.Contains(c.body, "<epoch>:<seq>") {
			t.Errorf("%s: %s, want <epoch>:<seq> unescaped", c.name, c.body)
		}
		var got struct{ Message string }
		if err := json.Unmarshal([]byte(c.body), &got); err != nil || got.Message != c.want {
			t.Errorf("%s: %s decodes to %q (%v), want %q", c.name, c.body, got.Message, err, c.want)
		}
	}
	if strings.HasSuffix(string(frame), "\n") || strings.HasSuffix(string(batch), "\n") {
		t.Errorf("a frame or a batch result ends in a newline: %q, %q", frame, batch)
	}
}
