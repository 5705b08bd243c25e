package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/roomcast/roomcast/replay"
)

// published is the answer to a publish: 201 {"room","epoch","seq","id"}.
type published struct {
	Room  string `json:"room"`
	Epoch string `json:"epoch"`
	Seq   uint64 `json:"seq"`
	ID    string `json:"id"`
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	msg, room, aerr := s.parsePublish(w, r)
	if aerr != nil {
		s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
		writeError(w, aerr)
		return
	}
	if r.Header["Wait-For"] != nil {
		s.publishReceipt(w, r, room, msg)
		return
	}
	ev, aerr := s.append(r.Context(), room, msg)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writePublished(w, room, ev)
}

// parsePublish validates a single publish request in the order a client would fix
// it: route, credential, type, key, media type, size, content.
func (s *Server) parsePublish(w http.ResponseWriter, r *http.Request) (replay.Message, string, *apiError) {
	room := chi.URLParam(r, "room")
	if !replay.ValidRoom(room) {
		return replay.Message{}, "", errBadRoom
	}
	p, aerr := s.publisher(r)
	if aerr != nil {
		return replay.Message{}, "", aerr
	}
	if aerr := s.mayPublish(p, room); aerr != nil {
		return replay.Message{}, "", aerr
	}
	typ := r.Header.Get("Event-Type")
	if typ == "" && r.URL.RawQuery != "" {
		typ = r.URL.Query().Get("type")
	}
	if typ != "" && !replay.ValidType(typ) {
		return replay.Message{}, "", typeError(typ)
	}
	key := r.Header.Get("Idempotency-Key")
	if key != "" && !validIdempotencyKey(key) {
		return replay.Message{}, "", errBadIdemKey
	}
	ttl, aerr := s.publishTTL(r)
	if aerr != nil {
		return replay.Message{}, "", aerr
	}
	mt, ok := publishMediaType(r.Header.Get("Content-Type"))
	if !ok {
		return replay.Message{}, "", errMediaType
	}
	if aerr := contentEncodingError(r); aerr != nil {
		return replay.Message{}, "", aerr
	}
	bp := getBody()
	defer putBody(bp)
	if aerr := readBodyInto(bp, r, s.cfg.MaxBody); aerr != nil {
		return replay.Message{}, "", aerr
	}
	// encode copies what it keeps: the pooled buffer goes back at once.
	body, aerr := encode(mt, *bp, s.cfg.MaxBody)
	if aerr != nil {
		return replay.Message{}, "", aerr
	}
	if typ == replay.DefaultType {
		typ = ""
	}
	return replay.Message{Type: typ, Body: body, IdempotencyKey: key, TTL: ttl}, room, nil
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, errBodyTimeout
	case err != nil:
		return nil, newError(http.StatusBadRequest, "invalid_body", "the body could not be read")
	}
	return raw, nil
}

// EncodeBody turns a publish body into the envelope's body: JSON (valid UTF-8) is
// compacted to one line as is; text/plain (valid UTF-8) becomes a JSON string.
func EncodeBody(mediaType string, raw []byte) (json.RawMessage, *apiError) {
	if mediaType == "text/plain" {
		if !utf8.Valid(raw) {
			return nil, errInvalidText
		}
		// No HTML escaping: an event is not HTML, and \u003c for every < would
		// make a text body six times its size.
		var out bytes.Buffer
		out.Grow(len(raw) + 3)
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(raw)); err != nil {
			return nil, errInvalidText
		}
		return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errEmptyBody
	}
	// Compact validates the syntax as it goes, but lets invalid UTF-8 inside strings
	// through; utf8.Valid is the one other pass, and runs at memory speed on ASCII.
	if !utf8.Valid(raw) {
		return nil, errInvalidUTF8
	}
	out, err := compactJSON(raw)
	if err != nil {
		return nil, errInvalidJSON
	}
	return out, nil
}

// validIdempotencyKey accepts 1 to 255 printable ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// append publishes one message and maps the log's errors to answers.
func (s *Server) append(ctx context.Context, room string, msg replay.Message) (replay.Event, *apiError) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	start := time.Now()
	ev, err := s.log.Append(ctx, room, msg)
	if err != nil {
		return replay.Event{}, s.publishFailed(ctx, room, err)
	}
	s.recordPublished(time.Since(start))
	return ev, nil
}

// batchAppender is the optional capability of a log that publishes many messages in
// one round trip. Results and errors come in the order of msgs.
type batchAppender interface {
	AppendBatch(ctx context.Context, rooms []string, msgs []replay.Message) ([]replay.Event, []error)
}

// appendMany publishes msgs[i] to rooms[i], pipelined when the log can, one by one
// otherwise.
func (s *Server) appendMany(ctx context.Context, rooms []string, msgs []replay.Message) ([]replay.Event, []*apiError) {
	evs := make([]replay.Event, len(msgs))
	aerrs := make([]*apiError, len(msgs))
	// One deadline for the whole batch, as for a pipelined one.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	ba, ok := s.log.(batchAppender)
	if !ok {
		for i := range msgs {
			start := time.Now()
			ev, err := s.log.Append(ctx, rooms[i], msgs[i])
			if err != nil {
				aerrs[i] = s.publishFailed(ctx, rooms[i], err)
				continue
			}
			s.recordPublished(time.Since(start))
			evs[i] = ev
		}
		return evs, aerrs
	}
	start := time.Now()
	evs, errs := ba.AppendBatch(ctx, rooms, msgs)
	took := time.Since(start)
	for i, err := range errs {
		if err != nil {
			aerrs[i] = s.publishFailed(ctx, rooms[i], err)
		} else {
			s.recordPublished(took)
		}
	}
	return evs, aerrs
}

func (s *Server) recordPublished(took time.Duration) {
	s.m.publishSeconds.Observe(took.Seconds())
	s.m.published.Inc()
}

// publishFailed maps a log error to its answer: never a hang, never a silent drop.
func (s *Server) publishFailed(ctx context.Context, room string, err error) *apiError {
	var aerr *apiError
	switch {
	case errors.Is(err, replay.ErrFull) && s.backend().Kind != "memory":
		// A shared backend out of memory, not this gateway's own bounds.
		s.cfg.Logger.Warn("publish failed", "room", room, "err", err)
		aerr = unavailable("the event log (" + s.logName() + ") is full: " + logCause(err) + "; the event was not published; retry later")
	case errors.Is(err, replay.ErrFull):
		aerr = unavailable("the gateway holds as many rooms or bytes of history as it may; retry later")
	case errors.Is(err, replay.ErrInvalid):
		aerr = newError(http.StatusBadRequest, "invalid_message", "the message failed validation")
	case errors.Is(err, context.Canceled) && ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		aerr = newError(499, "client_closed", "the client went away")
	case errors.Is(err, replay.ErrOutcomeUnknown):
		// The log may have run it: saying "not published" could make a retry
		// without a key publish it twice.
		s.cfg.Logger.Warn("publish outcome unknown", "room", room, "err", err)
		aerr = errOutcomeUnknown(s.logName(), logCause(err))
	default:
		// Unavailable, closed or timed out: the event was not published.
		s.cfg.Logger.Warn("publish failed", "room", room, "err", err)
		aerr = s.logUnavailable(err, "the event was not published")
	}
	s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
	return aerr
}
