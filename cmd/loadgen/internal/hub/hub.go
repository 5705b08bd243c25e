package hub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	queueLen     = 256              // frames buffered per subscriber
	maxBody      = 64 << 10         // publish body limit, bytes
	writeTimeout = 10 * time.Second // per write to a subscriber
	epoch        = "hub"
)

// Hub is the yardstick SSE hub. The zero value is not usable; call New.
type Hub struct {
	mux   *http.ServeMux
	mu    sync.Mutex
	rooms map[string]*room
	done  chan struct{}
	once  sync.Once
}

type room struct {
	mu      sync.Mutex
	seq     uint64
	members map[chan []byte]struct{}
}

// New returns a hub with its routes.
func New() *Hub {
	h := &Hub{mux: http.NewServeMux(), rooms: make(map[string]*room), done: make(chan struct{})}
	h.mux.HandleFunc("POST /rooms/{room}/events", h.publishOne)
	h.mux.HandleFunc("POST /events", h.publishBatch)
	h.mux.HandleFunc("GET /rooms/{room}/events", h.subscribe)
	h.mux.HandleFunc("GET /metrics", metrics)
	return h
}

// metrics answers the one figure a benchmark compares with the servers' own
// Prometheus expositions: go_goroutines, the goroutines that exist now.
func metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprintf(w, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n",
		runtime.NumGoroutine())
}

func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Close ends every open stream; it does not stop the server.
func (h *Hub) Close() { h.once.Do(func() { close(h.done) }) }

func (h *Hub) room(name string) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	rm := h.rooms[name]
	if rm == nil {
		rm = &room{members: make(map[chan []byte]struct{})}
		h.rooms[name] = rm
	}
	return rm
}

// publish assigns the next seq, builds the frame and offers it to every member.
func (h *Hub) publish(name, typ string, body []byte) uint64 {
	rm := h.room(name)
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.seq++
	seq := strconv.FormatUint(rm.seq, 10)
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	if typ == "" {
		typ = "message"
	}
	f := make([]byte, 0, len(body)+len(name)+128)
	f = append(f, "id: "+epoch+":"+seq+"\n"...)
	if typ != "message" {
		f = append(f, "event: "+typ+"\n"...)
	}
	f = append(f, `data: {"room":"`+name+`","epoch":"`+epoch+`","seq":`+seq+`,"ts":`+ts+`,"type":"`+typ+`","body":`...)
	f = append(append(f, body...), "}\n\n"...)
	for ch := range rm.members {
		select {
		case ch <- f:
		default: // slow subscriber: end its stream
			delete(rm.members, ch)
			close(ch)
		}
	}
	return rm.seq
}

func (h *Hub) publishOne(w http.ResponseWriter, r *http.Request) {
	name, typ := r.PathValue("room"), r.URL.Query().Get("type")
	if !valid(name, 128, "~") || (typ != "" && !valid(typ, 64, "")) {
		http.Error(w, `{"error":"bad room or type"}`, http.StatusBadRequest)
		return
	}
	raw, ok := readBody(w, r)
	if !ok {
		return
	}
	var body bytes.Buffer
	if err := json.Compact(&body, raw); err != nil {
		http.Error(w, `{"error":"invalid json"}`, http.StatusBadRequest)
		return
	}
	seq := h.publish(name, typ, body.Bytes())
	writeJSON(w, result{name, epoch, seq, epoch + ":" + strconv.FormatUint(seq, 10)})
}

func (h *Hub) publishBatch(w http.ResponseWriter, r *http.Request) {
	var items []struct {
		Room string          `json:"room"`
		Type string          `json:"type"`
		Body json.RawMessage `json:"body"`
	}
	raw, ok := readBody(w, r)
	if !ok {
		return
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		http.Error(w, `{"error":"invalid json"}`, http.StatusBadRequest)
		return
	}
	bodies := make([]bytes.Buffer, len(items))
	for i, it := range items { // validate everything before publishing anything
		if !valid(it.Room, 128, "~") || (it.Type != "" && !valid(it.Type, 64, "")) || json.Compact(&bodies[i], it.Body) != nil {
			http.Error(w, `{"error":"bad item"}`, http.StatusBadRequest)
			return
		}
	}
	out := make([]result, len(items))
	for i, it := range items {
		seq := h.publish(it.Room, it.Type, bodies[i].Bytes())
		out[i] = result{it.Room, epoch, seq, epoch + ":" + strconv.FormatUint(seq, 10)}
	}
	writeJSON(w, out)
}

func (h *Hub) subscribe(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("room")
	if !valid(name, 128, "~") {
		http.Error(w, `{"error":"bad room"}`, http.StatusBadRequest)
		return
	}
	rm, ch := h.room(name), make(chan []byte, queueLen)
	rm.mu.Lock()
	rm.members[ch] = struct{}{}
	rm.mu.Unlock()
	defer func() { // a dropped subscriber was removed by publish already
		rm.mu.Lock()
		delete(rm.members, ch)
		rm.mu.Unlock()
	}()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	if _, err := w.Write([]byte("retry: 3000\n\n")); err != nil || rc.Flush() != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case f, ok := <-ch:
			if !ok {
				return // dropped as a slow subscriber
			}
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			open, err := writePending(w, f, ch)
			if err != nil || rc.Flush() != nil || !open {
				return
			}
		}
	}
}

// writePending writes f and every frame already queued behind it, without waiting;
// open is false when the channel was closed (the subscriber was dropped).
func writePending(w http.ResponseWriter, f []byte, ch <-chan []byte) (open bool, err error) {
	for {
		if _, err := w.Write(f); err != nil {
			return false, err
		}
		select {
		case next, ok := <-ch:
			if !ok {
				return false, nil
			}
			f = next
		default:
			return true, nil
		}
	}
}

type result struct {
	Room  string `json:"room"`
	Epoch string `json:"epoch"`
	Seq   uint64 `json:"seq"`
	ID    string `json:"id"`
}

// readBody reads a request body up to maxBody; on failure it answers and returns false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, `{"error":"body"}`, status)
		return nil, false
	}
	return b, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(v)
}

// valid checks a room name or event type: 1..maxLen of [A-Za-z0-9._-] plus extra.
func valid(s string, maxLen int, extra string) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-' || strings.IndexByte(extra, c) >= 0
		if !ok {
			return false
		}
	}
	return true
}
