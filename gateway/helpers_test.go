package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// pod is a complete gateway pod on httptest servers: the real router, registry and
// drainer over a real log (the memory log unless the test gives another).
type pod struct {
	log    replay.Log
	mem    *replay.MemoryLog // the log, when it is the memory log
	rooms  *rooms.Registry
	drain  *drain.Drainer
	srv    *gateway.Server
	public *httptest.Server
	admin  *httptest.Server
	// closedConns receives the remote address of every public connection the server
	// closes.
	closedConns chan string
	// hijacked receives the remote address of every public connection taken out of
	// net/http: with the idle loop on, a stream once it is on the loop.
	hijacked chan string
}

type podConfig struct {
	gw         gateway.Config
	mem        replay.MemoryConfig
	history    int
	queue      int
	queueBytes int64
	policy     func(room string) rooms.Policy // rooms.Config.Policy
	drain      drain.Config
}

func newPod(t testing.TB, pc podConfig) *pod {
	t.Helper()
	pc.mem.History = pc.history
	mem, err := replay.NewMemoryLog(pc.mem)
	if err != nil {
		t.Fatal(err)
	}
	p := newPodOn(t, mem, pc)
	p.mem = mem
	return p
}

// control is log's control plane; it fails t when log has none.
func control(t testing.TB, log replay.Log) replay.Control {
	t.Helper()
	c, ok := replay.ControlOf(log)
	if !ok {
		t.Fatalf("%T has no control plane", log)
	}
	return c
}

// newPodOn builds a pod over log, which it closes at the end of the test.
func newPodOn(t testing.TB, log replay.Log, pc podConfig) *pod {
	t.Helper()
	reg, err := rooms.New(log, log, rooms.Config{
		Queue: pc.queue, QueueBytes: pc.queueBytes, Linger: 10 * time.Millisecond, Policy: pc.policy,
		Logger: gatewaytest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pc.drain.Logger == nil {
		pc.drain.Logger = slog.New(slog.DiscardHandler)
	}
	if pc.drain.Timeout == 0 {
		pc.drain.Timeout = 10 * time.Second
	}
	conns := gateway.NewConnections(reg)
	pc.gw.Connections = conns
	dr, err := drain.New(conns, pc.drain)
	if err != nil {
		t.Fatal(err)
	}
	if pc.gw.Logger == nil {
		// Logs are searched for secrets at the end of the run.
		pc.gw.Logger = gatewaytest.Logger()
	}
	if pc.gw.RetryMin == 0 {
		pc.gw.RetryMin, pc.gw.RetryMax = 3*time.Second, 6*time.Second
	}
	if v := gatewaytest.IdleLoop(t); v != "" && pc.gw.IdleLoop == gateway.IdleLoopDefault {
		if pc.gw.IdleLoop, err = gateway.ParseIdleLoop(v); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := gateway.New(log, reg, dr, pc.gw)
	if err != nil {
		t.Fatal(err)
	}
	// Every exchange with the pod is checked against openapi.yaml: the description
	// holds for whatever the tests send.
	p := &pod{log: log, rooms: reg, drain: dr, srv: srv, closedConns: make(chan string, 1024), hijacked: make(chan string, 1024),
		public: httptest.NewUnstartedServer(apiCheck(t, srv.Public())), admin: httptest.NewServer(apiCheck(t, srv.Admin()))}
	p.public.Config.ConnState = func(c net.Conn, s http.ConnState) {
		var to chan string
		switch s {
		case http.StateClosed:
			to = p.closedConns
		case http.StateHijacked:
			to = p.hijacked
		default:
			return
		}
		select {
		case to <- c.RemoteAddr().String():
		default:
		}
	}
	gateway.SetLoopClosedHook(srv, func(addr string) {
		select {
		case p.closedConns <- addr:
		default:
		}
	})
	p.public.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The hooks would keep the server, and all it holds, for the rest of the
		// process.
		defer gateway.ClearHooks(srv)
		_ = reg.CloseAll(ctx)
		p.public.Close()
		p.admin.Close()
		_ = reg.Close(ctx)
		_ = log.Close(ctx)
	})
	return p
}

// publish posts a JSON body and returns the answer's event id.
func (p *pod) publish(t testing.TB, room, body string) string {
	t.Helper()
	res := do(t, http.MethodPost, p.public.URL+"/rooms/"+room+"/events", body, "Content-Type", "application/json")
	if res.status != http.StatusCreated {
		t.Fatalf("publish to %s: %d %s", room, res.status, res.body)
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(res.body), &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

type response struct {
	status int
	header http.Header
	body   string
}

// do sends one request; headers come as name, value pairs ("Host" sets the Host
// header in place of the URL's).
func do(t testing.TB, method, url, body string, headers ...string) response {
	t.Helper()
	req, err := gatewaytest.NewRequest(context.Background(), method, url, strings.NewReader(body), headers...)
	if err != nil {
		t.Fatal(err)
	}
	res := doRequest(t, req)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

// doRequest sends req with headers (name, value pairs) and returns the answer.
func doRequest(t testing.TB, req *http.Request, headers ...string) *http.Response {
	t.Helper()
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// metrics scrapes the pod's admin /metrics.
func (p *pod) metrics(t testing.TB) gatewaytest.Metrics {
	t.Helper()
	m, err := gatewaytest.Scrape(context.Background(), http.DefaultClient, p.admin.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// frame is one decoded SSE dispatch (or a retry/comment-only block).
type frame struct {
	id, event, data string
	hasID           bool
	retry           int
	comment         string
}

func (f frame) seq(t testing.TB) uint64 {
	t.Helper()
	_, s, _ := strings.Cut(f.id, ":")
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("frame id %q", f.id)
	}
	return n
}

// stream is an open SSE response read by a small decoder.
type stream struct {
	t      testing.TB
	res    *http.Response
	cancel func()
	frames chan frame
	ended  chan struct{}
	// err is what ended the read (io.EOF: the response's clean end); set once ended
	// is closed.
	err error
}

// subscribe opens room's stream; headers come as name, value pairs.
func (p *pod) subscribe(t testing.TB, room, query string, headers ...string) *stream {
	t.Helper()
	url := p.public.URL + "/rooms/" + room + "/events"
	if query != "" {
		url += "?" + query
	}
	return openStreamAt(t, url, headers...)
}

// openStreamAt opens the stream at url (a room's or the multiplexed one) and reads
// it in the background; headers come as name, value pairs.
func openStreamAt(t testing.TB, url string, headers ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return readStream(t, res, cancel)
}

// readStream reads res, an open stream's response, in the background; cancel ends
// the request (its context, or the connection it came on).
func readStream(t testing.TB, res *http.Response, cancel func()) *stream {
	s := &stream{t: t, res: res, cancel: cancel, frames: make(chan frame, 1<<16), ended: make(chan struct{})}
	go s.read()
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	<-s.ended
	s.res.Body.Close()
}

func (s *stream) read() {
	defer close(s.ended)
	defer close(s.frames)
	dec := gatewaytest.NewDecoder(bufio.NewReaderSize(s.res.Body, 1<<20), nil)
	for {
		f, err := dec.NextFrame()
		if err != nil {
			s.err = err
			return
		}
		s.frames <- frame{id: f.ID, hasID: f.HasID, event: f.Event, data: f.Data, retry: max(int(f.Retry), 0), comment: f.Comment}
	}
}

// next returns the next frame that is not a comment, a bare retry hint or an anchor.
func (s *stream) next() frame {
	s.t.Helper()
	for {
		f, ok := s.nextAny()
		if !ok {
			s.t.Fatal("stream ended while an event was expected")
		}
		if f.comment == "" && !(f.retry > 0 && f.data == "" && !f.hasID) && f.event != gatewaytest.AnchorType {
			return f
		}
	}
}

// nextAny returns the next frame of any kind; false when the stream ended.
func (s *stream) nextAny() (frame, bool) {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		return f, ok
	case <-time.After(10 * time.Second):
		s.t.Fatal("no frame within 10s")
		return frame{}, false
	}
}

// waitEnd reads until the server ends the stream and returns the frames it sent on
// the way.
func (s *stream) waitEnd() []frame {
	s.t.Helper()
	var out []frame
	for {
		f, ok := s.nextAny()
		if !ok {
			return out
		}
		out = append(out, f)
	}
}
