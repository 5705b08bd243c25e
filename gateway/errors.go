package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/roomcast/roomcast/replay"
)

// apiError is an error answer: a status and the JSON body {"error","message"}.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"error"`
	Message string `json:"message"`
	// RetryAfter, in seconds, sets the Retry-After header when positive.
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Code: code, Message: msg}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="roomcast"`)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// marshalJSON encodes v as json.Marshal does, without escaping <, > and & as
// \u003c, \u003e and \u0026: no answer of the gateway is HTML, and a message that
// says "<epoch>:<seq>" should read so.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

var (
	errNotFound         = newError(http.StatusNotFound, "not_found", "no such route")
	errMethodNotAllowed = newError(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
	errBadRoom          = newError(http.StatusBadRequest, "invalid_room", "room names are 1 to 128 characters of A-Z a-z 0-9 . _ ~ -")
	errBadType          = newError(http.StatusBadRequest, "invalid_type", "event types are 1 to 64 characters of A-Z a-z 0-9 . _ - and not reserved")
	errReservedType     = newError(http.StatusBadRequest, "invalid_type", "the event type is reserved: resync, reauth, anchor and expired (in any case) are the gateway's own frames, error and open are EventSource's own events")
	errBadLastEventID   = newError(http.StatusBadRequest, "invalid_last_event_id", "the resume point must be <epoch>:<seq> or <seq>")
	errBadIdemKey       = newError(http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key must be 1 to 255 printable ASCII characters")
	errUnauthorized     = newError(http.StatusUnauthorized, "unauthorized", "publishing needs Authorization: Bearer <token>")
	errForbidden        = newError(http.StatusForbidden, "forbidden", "with no publish token configured, only loopback clients may publish")
	errMediaType        = newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "send application/json or text/plain")
	errBatchMediaType   = newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "send a JSON array as application/json")
	errInvalidJSON      = newError(http.StatusBadRequest, "invalid_json", "the body is not valid JSON")
	errInvalidUTF8      = newError(http.StatusBadRequest, "invalid_json", "the JSON body is not valid UTF-8")
	errContentEncoding  = newError(http.StatusUnsupportedMediaType, "unsupported_content_encoding", "send the body uncompressed (no Content-Encoding, or identity)")
	errInvalidText      = newError(http.StatusBadRequest, "invalid_body", "a text/plain body must be valid UTF-8")
	errBodyTimeout      = newError(http.StatusRequestTimeout, "request_timeout", "the body did not arrive within the body timeout")
	errEmptyBody        = newError(http.StatusBadRequest, "invalid_body", "the body is empty")
)

func tooLarge(limit int64) *apiError {
	return newError(http.StatusRequestEntityTooLarge, "payload_too_large",
		"the body exceeds "+strconv.FormatInt(limit, 10)+" bytes")
}

func unavailable(msg string) *apiError {
	e := newError(http.StatusServiceUnavailable, "unavailable", msg)
	e.RetryAfter = 1
	return e
}

// errOutcomeUnknown answers a publish that may have reached the log although the
// call failed (no answer in time, a lost connection, too few replicas); log names
// the backend and cause says what went wrong.
func errOutcomeUnknown(log, cause string) *apiError {
	e := newError(http.StatusServiceUnavailable, "outcome_unknown",
		"the event may have been published: its outcome is unknown (the event log, "+log+": "+cause+"); retry with the same Idempotency-Key to publish it at most once")
	e.RetryAfter = 1
	return e
}

// logUnavailable answers a call the event log could not serve: it names the backend
// and its address (never a credential), says why in a few words and what became of
// the call (then, e.g. "the event was not published").
// storeUnavailable answers a request that a fleet store (tickets, revocations,
// occupancy, the client registry: they live on the event log's backend) could not
// serve, naming the store, the backend and its address, never a credential.
func (s *Server) storeUnavailable(store string, err error, then string) *apiError {
	return unavailable("the " + store + " (" + s.logName() + ") is unavailable: " + logCause(err) + "; " + then)
}

func (s *Server) logUnavailable(err error, then string) *apiError {
	return unavailable("the event log (" + s.logName() + ") is unavailable: " + logCause(err) + "; " + then + "; retry later")
}

// logCause says in a few words why a call to the event log failed: a deadline, a
// closed log, else the innermost error of the chain (a refused connection, Redis's
// own words), without the wrappers that repeat the room or the address. It is cut to
// printable ASCII, at most 100 bytes.
func logCause(err error) string {
	switch {
	case err == nil:
		return "no cause given"
	case errors.Is(err, replay.ErrClosed):
		return "the log is closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	}
	parent, leaf := err, err
	for {
		var next error
		switch u := leaf.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			// The log wraps as "<sentinel>: <cause>": the cause comes last.
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[len(errs)-1]
			}
		}
		if next == nil {
			break
		}
		parent, leaf = leaf, next
	}
	cause := leaf.Error()
	if leaf == replay.ErrUnavailable || leaf == replay.ErrOutcomeUnknown {
		// A sentinel says only what kind of failure it was: the words after it in
		// the error that wrapped it say which.
		cause = "unreachable"
		if rest, ok := strings.CutPrefix(parent.Error(), leaf.Error()+": "); ok && parent != leaf {
			cause = rest
		}
	}
	if cause = printableASCII(cause, 100); cause == "" {
		return "unreachable"
	}
	return cause
}
