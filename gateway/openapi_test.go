package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// apiSpec is gateway/openapi.yaml built once: the validator and, for each described
// path, its template as a pattern and its methods.
type apiSpec struct {
	mu    sync.Mutex // the validator is not documented as safe for concurrent use
	v     validator.Validator
	model *v3.Document
	paths []specPath
}

type specPath struct {
	template string
	re       *regexp.Regexp
	item     *v3.PathItem
}

var (
	specOnce sync.Once
	spec     *apiSpec
	specErr  error
)

func loadSpec(t testing.TB) *apiSpec {
	t.Helper()
	specOnce.Do(func() { spec, specErr = buildSpec(gateway.OpenAPI()) })
	if specErr != nil {
		t.Fatalf("openapi.yaml: %v", specErr)
	}
	return spec
}

func buildSpec(raw []byte) (*apiSpec, error) {
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, err
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	// Credentials are the gateway's to judge, not the description's: a request
	// without one may be answered 401, which the description lists.
	v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation(), config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("the description is not a valid OpenAPI 3.1 document: %s", describeErrors(verrs))
	}
	s := &apiSpec{v: v, model: &model.Model}
	param := regexp.MustCompile(`\\\{[^}]+\\\}`)
	for p, item := range model.Model.Paths.PathItems.FromOldest() {
		re := regexp.MustCompile("^" + param.ReplaceAllString(regexp.QuoteMeta(p), "[^/]+") + "$")
		s.paths = append(s.paths, specPath{template: p, re: re, item: item})
	}
	return s, nil
}

// operations returns the described operations as "METHOD /path" keys.
func (s *apiSpec) operations() map[string]bool {
	ops := map[string]bool{}
	for _, p := range s.paths {
		for m := range p.item.GetOperations().FromOldest() {
			ops[strings.ToUpper(m)+" "+p.template] = true
		}
	}
	return ops
}

// find returns the described path that serves path (a concrete path wins over a
// template) and its operation for method, or nil.
func (s *apiSpec) find(method, path string) (*specPath, *v3.Operation) {
	var best *specPath
	for i := range s.paths {
		p := &s.paths[i]
		if !p.re.MatchString(path) {
			continue
		}
		if best == nil || strings.Count(p.template, "{") < strings.Count(best.template, "{") {
			best = p
		}
	}
	if best == nil {
		return nil, nil
	}
	op, _ := best.item.GetOperations().Get(strings.ToLower(method))
	return best, op
}

func describeErrors[E error](errs []E) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n\t")
		b.WriteString(e.Error())
	}
	return b.String()
}

// TestOpenAPIRoutes checks openapi.yaml against the routers: every route of both
// listeners is described, and every described operation is routed. The exceptions
// are the ones the routers cannot show: HEAD goes wherever GET does
// (middleware.GetHead), OPTIONS preflights are the CORS wrapper's, the pages are the
// routers' NotFound handler (web.Public, web.Admin), and /debug/pprof/* is pprof's
// index and named profiles, described as /debug/pprof/ and /debug/pprof/{profile}. A
// route registered for every method (Handle) is described by its GET.
func TestOpenAPIRoutes(t *testing.T) {
	s := loadSpec(t)
	p := newPod(t, podConfig{})
	described := s.operations()

	routed := map[string]bool{}
	anyMethod := map[string]bool{} // paths routed for every method
	walk := func(r chi.Routes) {
		t.Helper()
		byPath := map[string][]string{}
		err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			byPath[route] = append(byPath[route], method)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for route, methods := range byPath {
			paths := []string{route}
			if route == "/debug/pprof/*" {
				paths = []string{"/debug/pprof/", "/debug/pprof/{profile}"}
			}
			all := len(methods) >= 9 // chi's every method: CONNECT to TRACE
			for _, path := range paths {
				if all {
					anyMethod[path] = true
				}
				for _, m := range methods {
					routed[m+" "+path] = true
				}
			}
		}
	}
	walk(p.srv.PublicRoutes())
	walk(p.srv.AdminRoutes())
	if len(routed) == 0 {
		t.Fatal("the walk found no routes")
	}

	for key := range routed {
		m, path, _ := strings.Cut(key, " ")
		if anyMethod[path] {
			if !described["GET "+path] {
				t.Errorf("route %s (any method) is not described: openapi.yaml has no GET %s", path, path)
			}
			continue
		}
		if !described[key] {
			t.Errorf("route %s %s is not described in openapi.yaml", m, path)
		}
	}
	pages := map[string]bool{"/": true, "/roomcast.js": true, "/roomcast.d.ts": true, "/assets/{file}": true}
	for key := range described {
		m, path, _ := strings.Cut(key, " ")
		switch {
		case routed[key]:
		case m == http.MethodHead && routed["GET "+path]:
		case m == http.MethodOptions && (path == "/events" || path == "/tickets" || path == "/rooms/{room}/events"):
		case pages[path] && m == http.MethodGet:
		default:
			t.Errorf("openapi.yaml describes %s, which no router serves", key)
		}
	}
	// The pages are the routers' fallback: each described page answers.
	for _, u := range []string{p.public.URL + "/", p.public.URL + "/roomcast.js", p.public.URL + "/roomcast.d.ts", p.public.URL + "/assets/demo.js", p.admin.URL + "/", p.admin.URL + "/assets/admin.js"} {
		if res := do(t, http.MethodGet, u, ""); res.status != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", u, res.status)
		}
	}
	// Every error code the description's Error schema lists is one the gateway
	// writes, and the other way round, as far as the source tells (errors.go and
	// the handlers): the list is checked for duplicates here.
	codes := errorCodes(t, s)
	if len(codes) == 0 {
		t.Fatal("no error codes in the Error schema")
	}
	seen := map[string]bool{}
	for _, c := range codes {
		if seen[c] {
			t.Errorf("error code %s listed twice", c)
		}
		seen[c] = true
	}
}

func errorCodes(t *testing.T, s *apiSpec) []string {
	t.Helper()
	sp := s.model.Components.Schemas.GetOrZero("Error")
	if sp == nil {
		t.Fatal("no Error schema")
	}
	prop := sp.Schema().Properties.GetOrZero("error")
	var codes []string
	for _, n := range prop.Schema().Enum {
		codes = append(codes, n.Value)
	}
	return codes
}

// TestOpenAPIServed checks GET /openapi.yaml: the embedded description, as YAML,
// and a route like the others (HEAD answers, POST is 405).
func TestOpenAPIServed(t *testing.T) {
	p := newPod(t, podConfig{})
	res := do(t, http.MethodGet, p.public.URL+"/openapi.yaml", "")
	if res.status != http.StatusOK || res.body != string(gateway.OpenAPI()) {
		t.Fatalf("GET /openapi.yaml: %d, %d bytes; want 200 and the description", res.status, len(res.body))
	}
	if mt, _, _ := mime.ParseMediaType(res.header.Get("Content-Type")); mt != "application/yaml" {
		t.Errorf("Content-Type %q, want application/yaml", res.header.Get("Content-Type"))
	}
	if !strings.HasPrefix(res.body, "openapi: 3.1.") {
		t.Errorf("the description does not start with openapi: 3.1.x: %.40q", res.body)
	}
	if res := do(t, http.MethodHead, p.public.URL+"/openapi.yaml", ""); res.status != http.StatusOK || res.body != "" {
		t.Errorf("HEAD /openapi.yaml: %d %q", res.status, res.body)
	}
	if res := do(t, http.MethodPost, p.public.URL+"/openapi.yaml", ""); res.status != http.StatusMethodNotAllowed || res.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /openapi.yaml: %d Allow %q, want 405 GET, HEAD", res.status, res.header.Get("Allow"))
	}
	// The admin listener does not serve it: its routes are described there too.
	if res := do(t, http.MethodGet, p.admin.URL+"/openapi.yaml", ""); res.status != http.StatusNotFound {
		t.Errorf("GET admin /openapi.yaml: %d, want 404", res.status)
	}
}

// apiCheck wraps a listener's handler so that every exchange through it is checked
// against openapi.yaml: every answer's status, headers and (unless a stream or an
// upgrade) body must be described, and a request answered 2xx must be one the
// description accepts (a request the gateway refuses may be anything: that is what
// the refusal is for). Mismatches fail t.
func apiCheck(t testing.TB, next http.Handler) http.Handler {
	s := loadSpec(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var reqBody bytes.Buffer
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &teeBody{ReadCloser: r.Body, buf: &reqBody}
		}
		rec := &apiRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if msg := s.check(r, reqBody.Bytes(), rec); msg != "" {
			t.Errorf("openapi.yaml does not describe %s %s → %d: %s", r.Method, r.URL.RequestURI(), rec.statusOr200(), msg)
		}
	})
}

// check returns why the exchange does not match the description, or "".
func (s *apiSpec) check(r *http.Request, reqBody []byte, rec *apiRecorder) string {
	if rec.hijacked && !(rec.status == http.StatusOK && rec.streamed()) {
		// A WebSocket upgrade (101, or no status at all when the upgrader wrote
		// its answer on the hijacked connection itself, as on the idle loop's
		// path): the description can say no more of it. (A stream the idle loop
		// took is hijacked too, once its 200 is out: it is checked as any answer.)
		if _, op := s.find(r.Method, r.URL.Path); op == nil || op.Responses.Codes.GetOrZero("101") == nil {
			return "an upgrade where none is described"
		}
		return ""
	}
	status := rec.statusOr200()
	path, op := s.find(r.Method, r.URL.Path)
	if op == nil && r.Method == http.MethodHead && path != nil {
		// HEAD goes wherever GET does: GET's statuses, no body.
		op, _ = path.item.GetOperations().Get("get")
		if op == nil {
			return "HEAD of a path without GET"
		}
		if op.Responses.Codes.GetOrZero(strconv.Itoa(status)) == nil {
			return "status not described for GET"
		}
		return ""
	}
	if op == nil {
		// No operation: the answers the edge and the routers give any request.
		if !anyRoute(status) {
			return "no such operation"
		}
		if status == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "" {
			return "405 without Allow"
		}
		if r.Method == http.MethodHead {
			return ""
		}
		return errorBody(rec)
	}

	req := r.Clone(r.Context())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	req.ContentLength = int64(len(reqBody))
	res := &http.Response{StatusCode: status, Header: rec.Header().Clone(), Request: req,
		Body: io.NopCloser(bytes.NewReader(rec.body.Bytes()))}
	if rec.streamed() || r.Method == http.MethodHead {
		// A stream: status and headers only.
		res.Body = http.NoBody
		res.Header.Del("Content-Type")
		if op.Responses.Codes.GetOrZero(strconv.Itoa(status)) == nil {
			return "status not described"
		}
		return ""
	}
	if op.Responses.Codes.GetOrZero(strconv.Itoa(status)) == nil && anyRoute(status) {
		// The edge's and the routers' answers to any request (a path of the other
		// listener is the pages' 404 here): the error body, as the description's
		// rules say.
		if r.Method == http.MethodHead {
			return ""
		}
		return errorBody(rec)
	}
	if rec.truncated {
		return "" // a body too large to keep: its status was checked by the gateway's own tests
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok, errs := s.v.ValidateHttpResponse(req, res); !ok {
		return "answer: " + describeErrors(errs)
	}
	if status >= 200 && status < 300 {
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		if ok, errs := s.v.ValidateHttpRequest(req); !ok {
			return "accepted request: " + describeErrors(errs)
		}
	}
	return ""
}

// anyRoute reports whether any request may be answered status before its route's
// handler runs, as the description's rules say: 404 (no route on this listener), 405,
// 421, 401 (the admin token's guard), 403 (cross_origin), 408 and 413 (the body).
func anyRoute(status int) bool {
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusMisdirectedRequest, http.StatusUnauthorized,
		http.StatusForbidden, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

// errorBody checks an error answer's body: {"error","message"}, both non-empty.
func errorBody(rec *apiRecorder) string {
	var e map[string]any
	if err := json.Unmarshal(rec.body.Bytes(), &e); err != nil {
		return "error body is not JSON: " + err.Error()
	}
	code, _ := e["error"].(string)
	msg, _ := e["message"].(string)
	if len(e) != 2 || code == "" || msg == "" {
		return fmt.Sprintf("error body %s is not {\"error\",\"message\"}", rec.body.Bytes())
	}
	return ""
}

// teeBody keeps a copy of what the handler reads of a request body.
type teeBody struct {
	io.ReadCloser
	buf *bytes.Buffer
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.buf.Len() < maxKept {
		b.buf.Write(p[:n])
	}
	return n, err
}

// maxKept bounds the bytes of a body apiCheck keeps.
const maxKept = 1 << 20

// apiRecorder passes an answer through and keeps its status, headers and (up to
// maxKept, not for streams) body.
type apiRecorder struct {
	http.ResponseWriter
	status    int
	body      bytes.Buffer
	truncated bool
	hijacked  bool
}

func (w *apiRecorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *apiRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.streamed() {
		if w.body.Len()+len(p) > maxKept {
			w.truncated = true
		} else {
			w.body.Write(p)
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *apiRecorder) statusOr200() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *apiRecorder) streamed() bool {
	return strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
}

func (w *apiRecorder) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *apiRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *apiRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestOpenAPITraffic sends each route good and bad requests through a pod, whose
// every exchange is checked against openapi.yaml (apiCheck, as for every test pod):
// at least one request per route and per family of status it describes, whatever the
// other tests happen to send.
func TestOpenAPITraffic(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxBody: 1 << 10, MaxBatchItems: 3}})
	pub, adm := p.public.URL, p.admin.URL
	json := []string{"Content-Type", "application/json"}
	cases := []struct {
		method, url, body string
		headers           []string
		want              int
	}{
		{"GET", pub + "/healthz", "", nil, 200},
		{"HEAD", pub + "/healthz", "", nil, 200},
		{"GET", pub + "/readyz", "", nil, 200},
		{"GET", pub + "/openapi.yaml", "", nil, 200},
		{"GET", pub + "/", "", nil, 200},
		{"GET", pub + "/roomcast.js", "", nil, 200},
		{"GET", pub + "/roomcast.d.ts", "", nil, 200},
		{"GET", pub + "/assets/demo.js", "", nil, 200},
		{"GET", pub + "/assets/nope.js", "", nil, 404},
		{"GET", pub + "/nope", "", nil, 404},
		{"DELETE", pub + "/healthz", "", nil, 405},
		{"OPTIONS", pub + "/events", "", nil, 405},
		{"GET", pub + "/healthz", "", []string{"Host", "evil.example"}, 421},
		{"GET", pub + "/rooms/r!/events", "", nil, 400},
		{"GET", pub + "/rooms/r/events?lastEventId=x:y:z", "", nil, 400},
		{"HEAD", pub + "/rooms/r/events", "", nil, 200},
		{"HEAD", pub + "/rooms/r!/events", "", nil, 400},
		{"GET", pub + "/events", "", nil, 400},
		{"GET", pub + "/events?room=a&lastEventId=nonsense", "", nil, 400},
		{"HEAD", pub + "/events?room=a&room=b", "", nil, 200},
		{"POST", pub + "/rooms/r/events", `{"n":1}`, json, 201},
		{"POST", pub + "/rooms/r/events", "hello", []string{"Content-Type", "text/plain; charset=utf-8", "Event-Type", "greeting", "Idempotency-Key", "k1"}, 201},
		{"POST", pub + "/rooms/r/events?type=note", `[1,2]`, json, 201},
		{"POST", pub + "/rooms/r!/events", `{}`, json, 400},
		{"POST", pub + "/rooms/r/events", `{}`, []string{"Content-Type", "application/json", "Event-Type", "resync"}, 400},
		{"POST", pub + "/rooms/r/events", `{}`, []string{"Content-Type", "application/json", "Idempotency-Key", strings.Repeat("k", 256)}, 400},
		{"POST", pub + "/rooms/r/events", `{`, json, 400},
		{"POST", pub + "/rooms/r/events", ``, json, 400},
		{"POST", pub + "/rooms/r/events", `<a/>`, []string{"Content-Type", "application/xml"}, 415},
		{"POST", pub + "/rooms/r/events", `{}`, []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, 415},
		{"POST", pub + "/rooms/r/events", `"` + strings.Repeat("x", 2<<10) + `"`, json, 413},
		{"POST", pub + "/rooms/r/events", `{}`, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, 403},
		{"POST", pub + "/events", `[{"room":"a","body":1},{"room":"b","type":"t","body":{"x":2},"idempotencyKey":"k"},{"room":"c!","body":3}]`, json, 200},
		{"POST", pub + "/events", `[{"room":"a","type":"open","body":1},7]`, json, 200},
		{"POST", pub + "/events", `{}`, json, 400},
		{"POST", pub + "/events", `[]`, json, 400},
		{"POST", pub + "/events", `[{"room":"a","body":1},{"room":"a","body":1},{"room":"a","body":1},{"room":"a","body":1}]`, json, 413},
		{"POST", pub + "/events", `[]`, []string{"Content-Type", "text/plain"}, 415},
		{"GET", pub + "/ws", "", nil, 426},
		{"POST", pub + "/tickets", "", nil, 401},
		{"POST", pub + "/tickets", `{"sub":"u","subscribe":["r"]}`, []string{"Content-Type", "text/plain"}, 415},
		{"POST", pub + "/tickets", `{"sub":""}`, json, 400},

		{"GET", adm + "/", "", nil, 200},
		{"GET", adm + "/assets/admin.js", "", nil, 200},
		{"GET", adm + "/metrics", "", nil, 200},
		{"GET", adm + "/admin/stats", "", nil, 200},
		{"GET", adm + "/admin/rooms?prefix=r&limit=10", "", nil, 200},
		{"GET", adm + "/admin/rooms?limit=0", "", nil, 400},
		{"GET", adm + "/admin/rooms/r", "", nil, 200},
		{"GET", adm + "/admin/rooms/r!", "", nil, 400},
		{"GET", adm + "/admin/clients/c1", "", nil, 404},
		{"GET", adm + "/admin/clients/c!", "", nil, 400},
		{"POST", adm + "/admin/clients/c1/close", "", nil, 404},
		{"POST", adm + "/admin/clients/c!/close", "", nil, 400},
		{"POST", adm + "/admin/clients/c1/close?mode=later", "", nil, 400},
		{"POST", adm + "/admin/shed?count=2", "", nil, 200},
		{"POST", adm + "/admin/shed?count=x", "", nil, 400},
		{"POST", adm + "/admin/revoke", `{"sub":"mallory"}`, json, 200},
		{"POST", adm + "/admin/revoke", `{"sub":"a","jti":"b"}`, json, 400},
		{"POST", adm + "/admin/revoke", `{`, json, 400},
		{"GET", adm + "/debug/pprof/", "", nil, 200},
		{"GET", adm + "/debug/pprof/heap?debug=1", "", nil, 200},
		{"GET", adm + "/debug/pprof/nope", "", nil, 404},
		{"GET", adm + "/debug/pprof/cmdline", "", nil, 200},
		{"GET", adm + "/debug/pprof/symbol", "", nil, 200},
		{"GET", adm + "/admin/stats", "", []string{"Host", "evil.example"}, 421},
		{"PUT", adm + "/admin/stats", "", nil, 405},
		{"GET", adm + "/rooms/r/events", "", nil, 404},
	}
	for _, c := range cases {
		res := do(t, c.method, c.url, c.body, c.headers...)
		if res.status != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.url, res.status, res.body, c.want)
		}
	}

	// Streams: the status and headers are checked, then the stream is left.
	for _, u := range []string{pub + "/rooms/r/events", pub + "/rooms/r/events?lastEventId=1", pub + "/events?room=a&room=b"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := gatewaytest.NewRequest(ctx, http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := doRequest(t, req)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", u, res.StatusCode)
		}
		cancel()
		res.Body.Close()
	}
	// The drain last: then readyz says so.
	if res := do(t, http.MethodPost, adm+"/admin/drain", ""); res.status != http.StatusAccepted {
		t.Errorf("POST /admin/drain: %d %s", res.status, res.body)
	}
	if res := do(t, http.MethodGet, pub+"/readyz", ""); res.status != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz while draining: %d %s", res.status, res.body)
	}

	// With an admin token, the admin routes refuse a request without it.
	q := newPod(t, podConfig{gw: gateway.Config{AdminToken: "s3cret-admin"}})
	if res := do(t, http.MethodGet, q.admin.URL+"/admin/stats", ""); res.status != http.StatusUnauthorized {
		t.Errorf("GET /admin/stats without the admin token: %d", res.status)
	}
	if res := do(t, http.MethodGet, q.admin.URL+"/admin/stats", "", "Authorization", "Bearer s3cret-admin"); res.status != http.StatusOK {
		t.Errorf("GET /admin/stats with the admin token: %d", res.status)
	}
}

// TestOpenAPICheckFails checks that apiCheck can fail: an answer the description
// does not have (a status, a body) is reported.
func TestOpenAPICheckFails(t *testing.T) {
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"undescribed status", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }},
		{"body not the schema", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":1}`)
		}},
		{"error body not {error,message}", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = io.WriteString(w, `{"error":"misdirected_request"}`)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &failures{TB: t}
			srv := httptest.NewServer(apiCheck(rec, c.h))
			defer srv.Close()
			do(t, http.MethodGet, srv.URL+"/healthz", "")
			if rec.count() == 0 {
				t.Error("apiCheck let it pass")
			}
		})
	}
}

// failures is a testing.TB that counts the failures reported to it.
type failures struct {
	testing.TB
	mu sync.Mutex
	n  int
}

func (f *failures) Errorf(string, ...any) { f.mu.Lock(); f.n++; f.mu.Unlock() }

func (f *failures) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.n }
