package web

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// rendered is a JavaScript expression: whether the element with the given id
// takes up room on screen, as Chromium lays it out (not what its attributes
// say).
func rendered(id string) string {
	return `((el) => { if (!el) return false; const s = getComputedStyle(el); const r = el.getBoundingClientRect();` +
		` return s.display !== 'none' && s.visibility !== 'hidden' && el.offsetParent !== null && r.width > 0 && r.height > 0;` +
		` })(document.getElementById(` + jsString(id) + `))`
}

// TestOperatorPageAdminToken: against a gateway with an admin token, the operator
// page shows a prompt for it, keeps it in the tab's sessionStorage, asks again
// after a wrong one, and sends it on its stats polls and its drain. A poll refused
// because it left before the right token was entered does not make the page
// forget that token.
func TestOperatorPageAdminToken(t *testing.T) {
	const token = "adm-page-51f0"
	path := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, "--admin-token-file", path, "--drain-delay", "2s", "--drain-timeout", "4s")
	px := newStatsProxy(t, gw)
	ctx, tab := newTab(t)
	do(t, ctx, chromedp.Navigate(px.url("/?interval=300")))
	diag := `({text: document.body.innerText, stored: sessionStorage.getItem('roomcast.adminToken'), prompt: ` + rendered("token-form") + `})`
	waitFor(t, ctx, "the page to show the token prompt", rendered("token-form"), diag, 10*time.Second)

	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), "wrong-token"), chromedp.Click(chromedp.CSS("#token-form button")))
	waitFor(t, ctx, "the page to ask again after a wrong token",
		rendered("token-form")+` && sessionStorage.getItem('roomcast.adminToken') === null`, diag, 10*time.Second)

	// The next poll leaves without a token and is held back until the right
	// token has been entered; its 401 then arrives after the poll the token
	// set off.
	held := px.holdUnauthorized()
	select {
	case <-held.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("no stats poll without a token within 10 s")
	}
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#token-form button")))
	waitFor(t, ctx, "the page to keep the token", `sessionStorage.getItem('roomcast.adminToken') === '`+token+`'`, diag, 5*time.Second)
	close(held.through)
	select {
	case <-held.answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the held poll was not answered within 10 s")
	}
	if held.aborted {
		t.Fatal("the page gave up on the held poll before the token was entered")
	}
	// Two polls after the late 401 reached the page: the second left well after
	// the page handled it.
	after := px.polls()
	replaytest.Eventually(t, 10*time.Second, "two more stats polls", func() bool { return len(px.polls()) >= len(after)+2 })
	for i, auth := range px.polls()[len(after):] {
		if auth != "Bearer "+token {
			t.Fatalf("stats poll %d after the late 401 carried %q; the page forgot the token it was given", i+1, auth)
		}
	}
	waitFor(t, ctx, "the page to show a ready pod without the prompt",
		`document.getElementById('pod-state').dataset.state === 'ready' && !`+rendered("token-form")+` && `+
			`sessionStorage.getItem('roomcast.adminToken') === '`+token+`'`, diag, 10*time.Second)
	if n := tab.sent("POST " + px.url("/admin/drain")); n != 0 {
		t.Fatalf("%d drain requests before the operator asked for one", n)
	}

	do(t, ctx, chromedp.Click(chromedp.ID("drain")))
	waitFor(t, ctx, "the confirmation", `document.getElementById('confirm').open`, "", 5*time.Second)
	do(t, ctx, chromedp.Click(chromedp.ID("confirm-drain")))
	waitFor(t, ctx, "the page to show the drain", `document.getElementById('drain-result').dataset.tone === 'ok'`, diag, 5*time.Second)
	res, err := http.Get(gw.url("/readyz"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after the page's drain, /readyz answers %d, want 503", res.StatusCode)
	}
}

// statsProxy stands between the browser and a gateway's admin listener. It
// records the Authorization header of every stats poll and can hold back the
// next one sent without a token.
type statsProxy struct {
	srv *httptest.Server

	mu    sync.Mutex
	auths []string // Authorization of each stats poll, in arrival order
	hold  *heldPoll
}

// heldPoll is a stats poll the proxy holds back until through is closed.
type heldPoll struct {
	waiting  chan struct{} // closed once the poll waits
	through  chan struct{} // closed by the test to let it go on
	answered chan struct{} // closed once the gateway's answer is written
	aborted  bool          // the browser gave up on it while it waited; set before answered closes
}

func newStatsProxy(t *testing.T, g *gateway) *statsProxy {
	t.Helper()
	target, err := url.Parse(g.adminURL("/"))
	if err != nil {
		t.Fatal(err)
	}
	p := &statsProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite:  func(r *httputil.ProxyRequest) { r.SetURL(target) },
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/stats" {
			rp.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		p.mu.Lock()
		p.auths = append(p.auths, auth)
		h := p.hold
		if auth != "" {
			h = nil
		}
		if h != nil {
			p.hold = nil
		}
		p.mu.Unlock()
		if h == nil {
			rp.ServeHTTP(w, r)
			return
		}
		defer close(h.answered)
		close(h.waiting)
		select {
		case <-h.through:
		case <-r.Context().Done():
			h.aborted = true
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// holdUnauthorized makes the proxy hold back the next stats poll that carries
// no token.
func (p *statsProxy) holdUnauthorized() *heldPoll {
	h := &heldPoll{waiting: make(chan struct{}), through: make(chan struct{}), answered: make(chan struct{})}
	p.mu.Lock()
	p.hold = h
	p.mu.Unlock()
	return h
}

// polls returns the Authorization header of every stats poll so far.
func (p *statsProxy) polls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auths...)
}

func (p *statsProxy) url(path string) string { return p.srv.URL + path }
