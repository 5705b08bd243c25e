package gateway

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/replay"
)

// batchItem is one element of a POST /events body.
type batchItem struct {
	Room           string          `json:"room"`
	Type           string          `json:"type"`
	Body           json.RawMessage `json:"body"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

// batchResult is one element of the answer, in the order of the request: a published
// event with status 201, or an error with its status.
type batchResult struct {
	Status  int    `json:"status"`
	Room    string `json:"room"`
	Epoch   string `json:"epoch,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	ID      string `json:"id,omitempty"`
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// publishBatch serves POST /events: a JSON array of {room, type, body,
// idempotencyKey}. A well-formed batch is answered 200 with one result per item; an
// item's own error fails only that item.
func (s *Server) publishBatch(w http.ResponseWriter, r *http.Request) {
	p, aerr := s.parseBatchRequest(r)
	if aerr != nil {
		s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
		writeError(w, aerr)
		return
	}
	raw, aerr := readBody(w, r, s.cfg.MaxBatchBody)
	if aerr != nil {
		s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
		writeError(w, aerr)
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		writeError(w, newError(http.StatusBadRequest, "invalid_json", "the body must be a JSON array of {room, type, body}"))
		return
	}
	switch {
	case len(items) == 0:
		writeError(w, newError(http.StatusBadRequest, "empty_batch", "the batch holds no items"))
		return
	case len(items) > s.cfg.MaxBatchItems:
		writeError(w, newError(http.StatusRequestEntityTooLarge, "too_many_items", "a batch holds at most "+strconv.Itoa(s.cfg.MaxBatchItems)+" items"))
		return
	}
	results := make([]batchResult, len(items))
	var idx []int
	var rooms []string
	var msgs []replay.Message
	for i, rawItem := range items {
		res := &results[i]
		var it batchItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			res.fail(newError(http.StatusBadRequest, "invalid_item", "an item must be an object {room, type, body}"))
			continue
		}
		res.Room = it.Room
		msg, aerr := s.validateItem(it)
		if aerr == nil {
			// Each item is checked against the grants: one outside them fails alone.
			aerr = s.mayPublish(p, it.Room)
		}
		if aerr != nil {
			s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
			res.fail(aerr)
			continue
		}
		idx, rooms, msgs = append(idx, i), append(rooms, it.Room), append(msgs, msg)
	}
	evs, aerrs := s.appendMany(r.Context(), rooms, msgs)
	for j, i := range idx {
		if aerrs[j] != nil {
			results[i].fail(aerrs[j])
			continue
		}
		ev := evs[j]
		results[i] = batchResult{Status: http.StatusCreated, Room: rooms[j], Epoch: ev.Epoch, Seq: ev.Seq, ID: ev.ID()}
	}
	writeJSON(w, http.StatusOK, results)
}

func (res *batchResult) fail(aerr *apiError) {
	res.Status, res.Error, res.Message = aerr.Status, aerr.Code, aerr.Message
}

func (s *Server) parseBatchRequest(r *http.Request) (auth.Principal, *apiError) {
	p, aerr := s.publisher(r)
	if aerr != nil {
		return p, aerr
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return p, errBatchMediaType
	}
	return p, contentEncodingError(r)
}

func (s *Server) validateItem(it batchItem) (replay.Message, *apiError) {
	switch {
	case !replay.ValidRoom(it.Room):
		return replay.Message{}, errBadRoom
	case it.Type != "" && !replay.ValidType(it.Type):
		return replay.Message{}, typeError(it.Type)
	case it.IdempotencyKey != "" && !validIdempotencyKey(it.IdempotencyKey):
		return replay.Message{}, errBadIdemKey
	case len(it.Body) == 0:
		return replay.Message{}, errEmptyBody
	case int64(len(it.Body)) > s.cfg.MaxBody:
		return replay.Message{}, tooLarge(s.cfg.MaxBody)
	}
	body, aerr := encode("application/json", it.Body, s.cfg.MaxBody)
	if aerr != nil {
		return replay.Message{}, aerr
	}
	typ := it.Type
	if typ == replay.DefaultType {
		typ = ""
	}
	return replay.Message{Type: typ, Body: body, IdempotencyKey: it.IdempotencyKey}, nil
}
