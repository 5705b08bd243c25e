package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/roomcast/roomcast/replay"
)

// The publish path's own buffers and writers: a publish body is read into a pooled
// buffer, compacted once into the event's own slice, and answered without
// encoding/json.

// bodyPool holds the buffers publish bodies are read into; maxPooledBody bounds
// what it keeps, so one large body is not held for every later publish.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledBody = 256 << 10

func getBody() *[]byte { return bodyPool.Get().(*[]byte) }

func putBody(bp *[]byte) {
	if cap(*bp) > maxPooledBody {
		return
	}
	*bp = (*bp)[:0]
	bodyPool.Put(bp)
}

// readBodyInto reads r's body into *bp, refusing more than limit bytes. It stops
// one byte past the limit: the answer then closes the connection (see bodies), so
// the rest is never read.
func readBodyInto(bp *[]byte, r *http.Request, limit int64) *apiError {
	if r.ContentLength > limit {
		return tooLarge(limit)
	}
	b := (*bp)[:0]
	if r.ContentLength > int64(cap(b)) {
		b = make([]byte, 0, r.ContentLength+1)
	}
	defer func() { *bp = b }()
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := min(int64(cap(b)), limit+1)
		n, err := r.Body.Read(b[len(b):room])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return tooLarge(limit)
		}
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			return errBodyTimeout
		case err != nil:
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return tooLarge(limit)
			}
			return newError(http.StatusBadRequest, "invalid_body", "the body could not be read")
		}
	}
}

// publishMediaType is the media type of a publish body: application/json or
// text/plain, with or without parameters; ok is false for anything else.
func publishMediaType(ct string) (mt string, ok bool) {
	switch ct {
	case "application/json", "text/plain":
		return ct, true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && mt != "text/plain") {
		return "", false
	}
	return mt, true
}

// compactPool holds the buffers compactJSON compacts into.
var compactPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// compactJSON validates raw as JSON and compacts it in one pass, into a pooled
// buffer, then copies the result into a slice of its own, of its exact size.
func compactJSON(raw []byte) ([]byte, error) {
	buf := compactPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			compactPool.Put(buf)
		}
	}()
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// Header values of every JSON answer, shared: net/http only reads them, and Add
// would copy a slice at its capacity before appending.
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

// appendPublished appends the answer to a publish, {"room","epoch","seq","id"} and
// a newline, as encoding/json would write it.
func appendPublished(b []byte, room string, ev replay.Event) []byte {
	b = append(b, '{')
	b = appendEventFields(b, room, ev.Epoch, ev.Seq)
	return append(b, "}\n"...)
}

// appendEventFields appends "room":…,"epoch":…,"seq":…,"id":…, the fields that name
// a published event in an answer. Rooms and epochs are validated to characters that
// need no JSON escaping.
func appendEventFields(b []byte, room, epoch string, seq uint64) []byte {
	b = append(b, `"room":"`...)
	b = append(b, room...)
	b = append(b, `","epoch":"`...)
	b = append(b, epoch...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"id":"`...)
	b = append(b, epoch...)
	b = append(b, ':')
	b = strconv.AppendUint(b, seq, 10)
	return append(b, '"')
}

// writePublished answers a publish 201 {"room","epoch","seq","id"}.
func writePublished(w http.ResponseWriter, room string, ev replay.Event) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(http.StatusCreated)
	bp := getBody()
	*bp = appendPublished((*bp)[:0], room, ev)
	_, _ = w.Write(*bp)
	putBody(bp)
}
