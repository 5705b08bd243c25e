package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// decodeBatch decodes a POST /events body into its items. A well-formed batch takes
// one decoding pass; only when that fails is each item decoded on its own, so that
// an item that is not an object {room, type, body} fails alone (bad[i] is set for
// it). A body that is not a JSON array fails whole.
func decodeBatch(raw []byte) (items []batchItem, bad []*apiError, aerr *apiError) {
	if err := json.Unmarshal(raw, &items); err == nil && items != nil {
		return items, nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil || raws == nil {
		return nil, nil, newError(http.StatusBadRequest, "invalid_json", "the body must be a JSON array of {room, type, body}")
	}
	items, bad = make([]batchItem, len(raws)), make([]*apiError, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &items[i]); err != nil {
			items[i] = batchItem{}
			bad[i] = newError(http.StatusBadRequest, "invalid_item", "an item must be an object {room, type, body}")
		}
	}
	return items, bad, nil
}

// appendBatchResult appends one result as marshalJSON would write it: a
// published event by hand (its room and epoch are validated to characters that
// need no escaping; its id is epoch:seq, written from them, so ID may be empty),
// anything else through encoding/json.
func appendBatchResult(b []byte, res *batchResult) []byte {
	if res.Status != http.StatusCreated || res.Error != "" || res.Message != "" || res.Seq == 0 || res.Epoch == "" {
		if res.Status == http.StatusCreated && res.ID == "" {
			res.ID = res.Epoch + ":" + strconv.FormatUint(res.Seq, 10)
		}
		enc, err := marshalJSON(res)
		if err != nil {
			// A batchResult always encodes; never write half an answer.
			return append(b, `{"status":500,"error":"internal","message":"the result could not be encoded"}`...)
		}
		return append(b, enc...)
	}
	b = append(b, `{"status":201,`...)
	b = appendEventFields(b, res.Room, res.Epoch, res.Seq)
	return append(b, '}')
}

// writeBatchResults answers a batch 200 with its results, one per item, in order.
func writeBatchResults(w http.ResponseWriter, results []batchResult) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(http.StatusOK)
	bp := getBody()
	b := append((*bp)[:0], '[')
	for i := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendBatchResult(b, &results[i])
	}
	b = append(b, "]\n"...)
	_, _ = w.Write(b)
	*bp = b
	putBody(bp)
}
