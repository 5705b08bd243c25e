package gateway

import (
	"encoding/json"
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
	TTL            json.RawMessage `json:"ttl"` // as Event-TTL: "30s", or whole seconds
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
	// Every refusal, of the whole batch or of one item, counts once by its code.
	refuse := func(aerr *apiError) {
		s.m.publishErrors.WithLabelValues(aerr.Code).Inc()
		writeError(w, aerr)
	}
	p, aerr := s.parseBatchRequest(r)
	if aerr != nil {
		refuse(aerr)
		return
	}
	bp := getBody()
	defer putBody(bp)
	if aerr := readBodyInto(bp, r, s.cfg.MaxBatchBody); aerr != nil {
		refuse(aerr)
		return
	}
	items, bad, aerr := decodeBatch(*bp)
	if aerr != nil {
		refuse(aerr)
		return
	}
	switch {
	case len(items) == 0:
		refuse(newError(http.StatusBadRequest, "empty_batch", "the batch holds no items"))
		return
	case len(items) > s.cfg.MaxBatchItems:
		refuse(newError(http.StatusRequestEntityTooLarge, "too_many_items", "a batch holds at most "+strconv.Itoa(s.cfg.MaxBatchItems)+" items"))
		return
	}
	results := make([]batchResult, len(items))
	idx := make([]int, 0, len(items))
	rooms := make([]string, 0, len(items))
	msgs := make([]replay.Message, 0, len(items))
	for i := range items {
		res, it := &results[i], &items[i]
		if bad != nil && bad[i] != nil {
			s.m.publishErrors.WithLabelValues(bad[i].Code).Inc()
			res.fail(bad[i])
			continue
		}
		res.Room = it.Room
		msg, aerr := s.validateItem(*it)
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
		// The id is written from epoch and seq (appendBatchResult).
		results[i] = batchResult{Status: http.StatusCreated, Room: rooms[j], Epoch: ev.Epoch, Seq: ev.Seq}
	}
	writeBatchResults(w, results)
}

func (res *batchResult) fail(aerr *apiError) {
	res.Status, res.Error, res.Message = aerr.Status, aerr.Code, aerr.Message
}

func (s *Server) parseBatchRequest(r *http.Request) (auth.Principal, *apiError) {
	p, aerr := s.publisher(r)
	if aerr != nil {
		return p, aerr
	}
	if !isJSON(r) {
		return p, errBatchMediaType
	}
	if r.Header["Wait-For"] != nil {
		return p, errWaitBatch
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
	ttl, aerr := parseTTLField(it.TTL, s.cfg.MaxTTL)
	if aerr != nil {
		return replay.Message{}, aerr
	}
	body, aerr := encode("application/json", it.Body, s.cfg.MaxBody)
	if aerr != nil {
		return replay.Message{}, aerr
	}
	typ := it.Type
	if typ == replay.DefaultType {
		typ = ""
	}
	return replay.Message{Type: typ, Body: body, IdempotencyKey: it.IdempotencyKey, TTL: ttl}, nil
}
