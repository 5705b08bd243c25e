package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// fakeCentrifugo speaks the part of Centrifugo's wire loadgen uses: uni_sse streams
// authorised by an HS256 connection token naming one channel, and the publish API.
// Each channel keeps its whole history, so a reconnect asking to recover gets every
// publication after its offset. With dropAfter > 0, every stream's first connection
// ends after that many publications, so each subscriber must recover.
type fakeCentrifugo struct {
	t         *testing.T
	secret    []byte
	apiKey    string
	dropAfter int

	mu       sync.Mutex
	history  map[string][]string // channel → publication data, offset = index+1
	streams  map[string][]chan struct{}
	recovers []string // cf_connect subs seen on reconnects, as "channel@offset"
}

func newFakeCentrifugo(t *testing.T, dropAfter int) *fakeCentrifugo {
	return &fakeCentrifugo{t: t, secret: []byte("test-secret"), apiKey: "test-key", dropAfter: dropAfter,
		history: map[string][]string{}, streams: map[string][]chan struct{}{}}
}

func (f *fakeCentrifugo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/publish":
		f.publish(w, r)
	case "/connection/uni_sse":
		f.stream(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeCentrifugo) publish(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") != f.apiKey {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var req struct {
		Channel string          `json:"channel"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Channel == "" {
		fmt.Fprintf(w, `{"error":{"code":107,"message":"bad request"}}`)
		return
	}
	f.mu.Lock()
	f.history[req.Channel] = append(f.history[req.Channel], string(req.Data))
	offset := len(f.history[req.Channel])
	for _, c := range f.streams[req.Channel] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
	fmt.Fprintf(w, `{"result":{"offset":%d,"epoch":"ep1"}}`, offset)
}

func (f *fakeCentrifugo) stream(w http.ResponseWriter, r *http.Request) {
	var req centrifugoConnect
	if err := json.Unmarshal([]byte(r.URL.Query().Get("cf_connect")), &req); err != nil {
		http.Error(w, "bad connect", http.StatusBadRequest)
		return
	}
	var claims struct {
		Channels []string `json:"channels"`
		jwt.RegisteredClaims
	}
	if _, err := jwt.ParseWithClaims(req.Token, &claims, func(*jwt.Token) (any, error) { return f.secret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()); err != nil || len(claims.Channels) != 1 || claims.Subject == "" {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	ch := claims.Channels[0]
	wake := make(chan struct{}, 1)
	f.mu.Lock()
	f.streams[ch] = append(f.streams[ch], wake)
	top := len(f.history[ch])
	sub := map[string]any{"recoverable": true, "epoch": "ep1", "offset": top}
	next := top // publications already sent: offsets 1..next
	rec, recovering := req.Subs[ch]
	if recovering {
		f.recovers = append(f.recovers, fmt.Sprintf("%s@%d", ch, rec.Offset))
		var pubs []map[string]any
		for i := int(rec.Offset); i < top; i++ {
			pubs = append(pubs, map[string]any{"data": json.RawMessage(f.history[ch][i]), "offset": i + 1})
		}
		sub["recovered"], sub["publications"] = true, pubs
	}
	f.mu.Unlock()
	push, _ := json.Marshal(map[string]any{"connect": map[string]any{"client": "c", "subs": map[string]any{ch: sub}}})
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	fmt.Fprintf(w, "\r\ndata: %s\n\ndata: {}\n\n", push)
	w.(http.Flusher).Flush()
	sent := 0
	for {
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		}
		f.mu.Lock()
		h := f.history[ch]
		f.mu.Unlock()
		for ; next < len(h); next++ {
			fmt.Fprintf(w, "data: {\"channel\":%q,\"pub\":{\"data\":%s,\"offset\":%d}}\n\n", ch, h[next], next+1)
			sent++
			if !recovering && f.dropAfter > 0 && sent == f.dropAfter {
				w.(http.Flusher).Flush()
				return
			}
		}
		w.(http.Flusher).Flush()
	}
}

// centrifugoConfig is a run against srv with the fake's credentials in files.
func centrifugoConfig(t *testing.T, f *fakeCentrifugo, url string) Config {
	dir := t.TempDir()
	keyFile, secretFile := filepath.Join(dir, "key"), filepath.Join(dir, "secret")
	if err := os.WriteFile(keyFile, []byte(f.apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, f.secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"-url", url, "-protocol", "centrifugo", "-api-key-file", keyFile,
		"-token-secret-file", secretFile, "-subs", "12", "-rooms", "3", "-rate", "300", "-publishers", "4",
		"-warmup", "0s", "-duration", "400ms", "-connect-rate", "0", "-retry-cap", "50ms", "-progress", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRunAgainstCentrifugoWire(t *testing.T) {
	tests := []struct {
		name      string
		dropAfter int
	}{
		{name: "one connection each", dropAfter: 0},
		{name: "every stream recovers after a drop", dropAfter: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCentrifugo(t, tt.dropAfter)
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			rep, err := run(t.Context(), centrifugoConfig(t, f, srv.URL), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_ = rep.WriteTable(&b)
			if rep.Lossy() || rep.Resyncs != 0 || rep.Published == 0 || rep.PublishErrors != 0 || rep.Connected != 12 {
				t.Fatalf("against the Centrifugo wire:\n%s", b.String())
			}
			if want := uint64(rep.Published) * 4; rep.Deliveries != want {
				t.Errorf("deliveries = %d, want %d published × 4 subscribers per room = %d\n%s",
					rep.Deliveries, rep.Published, want, b.String())
			}
			if rep.P99ms <= 0 {
				t.Errorf("no latency measured:\n%s", b.String())
			}
			f.mu.Lock()
			recovers := len(f.recovers)
			f.mu.Unlock()
			if tt.dropAfter > 0 && (rep.Reconnects < 12 || recovers < 12) {
				t.Errorf("reconnects %d, recovering connects %d: want every subscriber to recover", rep.Reconnects, recovers)
			}
		})
	}
}

// TestCentrifugoLossDetected checks that the tracker sees a publication the server
// never delivered: the fake skips offset 3 of every stream.
func TestCentrifugoLossDetected(t *testing.T) {
	f := newFakeCentrifugo(t, 0)
	skip := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/connection/uni_sse" {
			f.ServeHTTP(&skipWriter{ResponseWriter: w, skip: `"offset":3}}`}, r)
			return
		}
		f.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(skip)
	t.Cleanup(srv.Close)
	rep, err := run(t.Context(), centrifugoConfig(t, f, srv.URL), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Lossy() || rep.Gaps == 0 {
		var b bytes.Buffer
		_ = rep.WriteTable(&b)
		t.Fatalf("a skipped offset went unnoticed:\n%s", b.String())
	}
}

// skipWriter drops every write containing skip.
type skipWriter struct {
	http.ResponseWriter
	skip string
}

func (s *skipWriter) Write(b []byte) (int, error) {
	if strings.Contains(string(b), s.skip) {
		return len(b), nil
	}
	return s.ResponseWriter.Write(b)
}

func (s *skipWriter) Flush() { s.ResponseWriter.(http.Flusher).Flush() }

func TestCentrifugoToken(t *testing.T) {
	secret := []byte("s3")
	now := time.Now()
	tok, err := centrifugoToken(secret, 7, "load-1", now)
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Channels []string `json:"channels"`
		jwt.RegisteredClaims
	}
	if _, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{"HS256"})); err != nil {
		t.Fatal(err)
	}
	if claims.Subject != "load7" || len(claims.Channels) != 1 || claims.Channels[0] != "load-1" ||
		claims.ExpiresAt == nil || !claims.ExpiresAt.After(now) {
		t.Errorf("claims = %+v", claims)
	}
}

func TestCentrifugoFlags(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-protocol", "mercure"},
		{"-protocol", "centrifugo", "-subs", "1"},
		{"-protocol", "centrifugo", "-subs", "0", "-batch", "5"},
		{"-protocol", "centrifugo", "-subs", "0", "-api-key-file", empty},
		{"-protocol", "centrifugo", "-subs", "0", "-api-key-file", filepath.Join(dir, "missing")},
	} {
		if code := realMain(args, io.Discard, io.Discard); code != exitError {
			t.Errorf("realMain(%q) = %d, want %d", args, code, exitError)
		}
	}
}

// FuzzCentrifugoFrame feeds arbitrary uni_sse frames to a subscriber: nothing panics,
// and only a publication or a connect push that recovered publications counts as a
// delivery.
func FuzzCentrifugoFrame(f *testing.F) {
	f.Add([]byte(`{"connect":{"client":"c","subs":{"r":{"recoverable":true,"epoch":"e","offset":4}}}}`), []byte(`{"channel":"r","pub":{"data":{"t":1},"offset":5}}`))
	f.Add([]byte(`{"connect":{"subs":{"r":{"recoverable":true,"recovered":true,"publications":[{"data":{},"offset":2}]}}}}`), []byte(`{}`))
	f.Add([]byte(`{"connect":{"subs":{"r":{}}}}`), []byte(`{"pub":{"offset":18446744073709551615}}`))
	f.Add([]byte(`{"connect":`), []byte(`{"disconnect":{"code":3001}}`))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		cfg := Config{Subs: 1}
		ls := &loadState{cfg: &cfg, allConnected: make(chan struct{}), settled: make(chan struct{})}
		ls.pendingSettle.Store(1)
		s := &subscriber{room: &room{name: "r"}, hist: new(histogram)}
		for i, data := range [][]byte{first, second} {
			before := s.deliveries.Load()
			s.handleCentrifugo(gatewaytest.Event{Data: data}, time.Now(), ls)
			if s.deliveries.Load() != before && !bytes.Contains(data, keyPub) && !bytes.HasPrefix(data, keyConnect) {
				t.Fatalf("frame %d %q counted as a delivery", i, data)
			}
		}
		_ = s.track.Gaps()
	})
}
