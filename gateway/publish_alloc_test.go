// The race detector drops a quarter of what goes into a sync.Pool, so allocation
// counts are exact only without it: .ci/run runs these tests in a pass without -race.

//go:build !race

package gateway_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// publishAllocs is what one publish through the real router costs in allocations,
// on the memory log, as measured here: the recorder's own (5: it clones the header
// and refuses a read deadline), the request's (chi's route values, the edge's body
// and writer wrappers, the publish deadline), the stored event's body, and one for
// the answer's header. Reading the body, compacting it and writing the answer
// allocate nothing more: the body is read into a pooled buffer, compacted once into
// the event's own slice, and the answer is written by hand (it was 27 with
// io.ReadAll, a growing buffer and encoding/json).
const publishAllocs = 18

func TestPublishAllocations(t *testing.T) {
	p := newPod(t, podConfig{history: 16})
	h := p.srv.Public()
	body := []byte(`{"user": "ada", "text": "hello, world", "n": 42}`)
	const runs = 200
	reqs := make([]*http.Request, runs+1)
	recs := make([]*httptest.ResponseRecorder, runs+1)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/rooms/alloc"+strconv.Itoa(i%8)+"/events", bytes.NewReader(body))
		reqs[i].Header.Set("Content-Type", "application/json")
		reqs[i].RemoteAddr = "127.0.0.1:1234"
		recs[i] = httptest.NewRecorder()
		recs[i].Body.Grow(256)
	}
	n := 0
	allocs := testing.AllocsPerRun(runs, func() {
		h.ServeHTTP(recs[n], reqs[n])
		n++
	})
	for i := 0; i < n; i++ {
		if recs[i].Code != http.StatusCreated {
			t.Fatalf("publish %d: %d %s", i, recs[i].Code, recs[i].Body)
		}
	}
	if allocs > publishAllocs {
		t.Errorf("a publish allocates %.0f times, want at most %d", allocs, publishAllocs)
	}
	t.Logf("%.0f allocations per publish", allocs)
}

// batchAllocs bounds the allocations of a 100-item POST /events through the real
// router on the memory log, per item: the item's decoded fields and the stored
// event's body, and little else (the request, its deadline and its answer are shared
// by all 100). It was 17.5 per item with a decoding pass per item, a deadline per
// item and encoding/json answers.
const batchAllocs = 5

func TestBatchPublishAllocations(t *testing.T) {
	p := newPod(t, podConfig{history: 16})
	h := p.srv.Public()
	var body bytes.Buffer
	body.WriteByte('[')
	const items = 100
	for i := range items {
		if i > 0 {
			body.WriteByte(',')
		}
		body.WriteString(`{"room":"alloc` + strconv.Itoa(i%8) + `","type":"chat","body":{"user": "ada", "text": "hello, world", "n": 42}}`)
	}
	body.WriteByte(']')
	const runs = 50
	reqs := make([]*http.Request, runs+1)
	recs := make([]*httptest.ResponseRecorder, runs+1)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/events", bytes.NewReader(body.Bytes()))
		reqs[i].Header.Set("Content-Type", "application/json")
		reqs[i].RemoteAddr = "127.0.0.1:1234"
		recs[i] = httptest.NewRecorder()
		recs[i].Body.Grow(16 << 10)
	}
	n := 0
	allocs := testing.AllocsPerRun(runs, func() {
		h.ServeHTTP(recs[n], reqs[n])
		n++
	})
	for i := 0; i < n; i++ {
		if recs[i].Code != http.StatusOK || bytes.Count(recs[i].Body.Bytes(), []byte(`"status":201`)) != items {
			t.Fatalf("batch %d: %d %.300s", i, recs[i].Code, recs[i].Body)
		}
	}
	if perItem := allocs / items; perItem > batchAllocs {
		t.Errorf("a batch allocates %.1f times per item, want at most %d", perItem, batchAllocs)
	}
	t.Logf("%.0f allocations per batch of %d", allocs, items)
}
