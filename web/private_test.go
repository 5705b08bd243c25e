package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// privateApp is a web app on its own origin, with a backend that mints a short-lived
// token for its user and trades it at the gateway's POST /tickets for a single-use
// ticket, which its page hands to roomcast.js.
type privateApp struct {
	*httptest.Server
	tickets atomic.Int64
}

// newPrivateApp serves the app on srv, unstarted until now so that its origin could
// be given to the gateway first.
func newPrivateApp(t *testing.T, srv *httptest.Server, keys *gatewaytest.Keys, gw *gateway, sub string, tokenTTL time.Duration) *privateApp {
	t.Helper()
	app := &privateApp{Server: srv}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			Public().ServeHTTP(w, r) // the app serves its own copy of roomcast.js
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>app</title><p>private room</p>`)
	})
	mux.HandleFunc("POST /ticket", func(w http.ResponseWriter, _ *http.Request) {
		token := keys.Sign(t, "EdDSA", gatewaytest.UserClaims(sub, tokenTTL, []string{"u." + sub}, nil))
		req, _ := http.NewRequest(http.MethodPost, gw.url("/tickets"), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := httpClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		var out struct{ Ticket string }
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated {
			http.Error(w, fmt.Sprintf("gateway answered %d", res.StatusCode), http.StatusBadGateway)
			return
		}
		app.tickets.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"ticket": gatewaytest.Secret("a ticket", out.Ticket)})
	})
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return app
}

// TestPrivateRoomAcrossOrigins: a page on origin A reads a private room on the
// gateway at origin B with tickets from A's backend; its tokens live 3 seconds, so
// the stream gets reauth after reauth, and the page still sees every event once, in
// order. A page on an origin the gateway does not list cannot read the room even
// with a valid ticket, nor ask for one with a valid token.
func TestPrivateRoomAcrossOrigins(t *testing.T) {
	requireGateway(t)
	keys := gatewaytest.NewKeys(t)
	dir := t.TempDir()
	pubKey := filepath.Join(dir, "publish.key")
	if err := os.WriteFile(pubKey, []byte(gatewaytest.Secret("a publish key", "publish-key-for-the-browser-test")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The allowed origin must be known before the gateway starts: take its port first.
	srv := httptest.NewUnstartedServer(nil)
	allowed := "http://" + srv.Listener.Addr().String()
	gw := startGateway(t, "--jwt-key", keys.Ed25519File, "--publish-token-file", pubKey, "--allow-origin", allowed)
	app := newPrivateApp(t, srv, keys, gw, "ana", 3*time.Second)
	const room = "u.ana"
	publish := func(n int) string {
		req, _ := http.NewRequest(http.MethodPost, gw.url("/rooms/"+room+"/events"), strings.NewReader(fmt.Sprintf(`{"n":%d}`, n)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer publish-key-for-the-browser-test")
		res, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var p published
		if err := json.NewDecoder(res.Body).Decode(&p); err != nil || res.StatusCode != http.StatusCreated {
			t.Fatalf("publish: %d (%v)", res.StatusCode, err)
		}
		return p.ID
	}

	ctx, _ := newTab(t)
	do(t, ctx, chromedp.Navigate(allowed+"/"))
	installHarness(t, ctx, room, fmt.Sprintf(`{
		baseUrl: %q,
		getTicket: async () => (await (await fetch('/ticket', {method: 'POST'})).json()).ticket,
		onReauth: (r) => (window.reauths = window.reauths || []).push(r),
	}`, gw.url("/")))
	waitFor(t, ctx, "the private stream to open", `rc.sub.state === 'open'`, harnessDiag, 10*time.Second)

	// Publish across at least two expiries: each reauth ends the stream, the
	// module fetches a new ticket and resumes from its cursor.
	var want []string
	for n := 1; eval[int](t, ctx, `(window.reauths || []).length`) < 2; n++ {
		want = append(want, publish(n))
		waitFor(t, ctx, fmt.Sprintf("event %d", n), fmt.Sprintf(`rc.events.includes(%q)`, want[len(want)-1]), harnessDiag, 15*time.Second)
		if n > 5000 {
			t.Fatal("no two reauths after 5000 events")
		}
	}
	// And a few more once the second reauth has been answered.
	for n, last := len(want)+1, len(want)+3; n <= last; n++ {
		want = append(want, publish(n))
	}
	waitFor(t, ctx, "the last events", fmt.Sprintf(`rc.events.includes(%q)`, want[len(want)-1]), harnessDiag, 15*time.Second)
	s := harness(t, ctx)
	if !slices.Equal(s.Events, want) {
		t.Fatalf("delivered %d events %v, want %d %v", len(s.Events), s.Events, len(want), want)
	}
	reauths := eval[[]struct {
		Room string
		Exp  int64
	}](t, ctx, `window.reauths`)
	if len(reauths) < 2 || reauths[0].Room != room || reauths[0].Exp == 0 {
		t.Fatalf("reauths %+v, want two or more for %s", reauths, room)
	}
	if s.Stats.Duplicates != 0 || len(s.Gaps) != 0 || len(s.Resyncs) != 0 {
		t.Fatalf("across the reauths: %d duplicates, gaps %v, resyncs %v", s.Stats.Duplicates, s.Gaps, s.Resyncs)
	}
	if n := app.tickets.Load(); n < 3 {
		t.Fatalf("%d tickets fetched, want one per connect (at least 3)", n)
	}
	t.Logf("%d events over %d reauths with %d tickets", len(want), len(reauths), app.tickets.Load())

	// Another origin, not listed.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>elsewhere</title>`)
	}))
	t.Cleanup(other.Close)
	ticket := fetchTicket(t, app)
	token := keys.Sign(t, "EdDSA", gatewaytest.UserClaims("ana", time.Hour, []string{"u.ana"}, nil))
	do(t, ctx, chromedp.Navigate(other.URL+"/"))
	got := eval[map[string]any](t, ctx, fmt.Sprintf(`(async () => {
		const out = {};
		try {
			const r = await fetch(%q, {method: 'POST', headers: {Authorization: 'Bearer ' + %q}});
			out.ticket = 'answered ' + r.status;
		} catch (e) { out.ticket = 'refused'; }
		out.stream = await new Promise((resolve) => {
			const es = new EventSource(%q);
			es.onmessage = (e) => { es.close(); resolve('read ' + e.data); };
			es.onerror = () => { const s = es.readyState; es.close(); resolve('error, readyState ' + s); };
		});
		return out;
	})()`, gw.url("/tickets"), token, gw.url("/rooms/"+room+"/events?lastEventId=0&ticket="+ticket)))
	if got["ticket"] != "refused" || got["stream"] != "error, readyState 2" {
		t.Fatalf("from an origin not allowed: %v; want the ticket request refused and the stream unreadable", got)
	}
}

// fetchTicket asks the app's backend for a ticket, as its page would.
func fetchTicket(t *testing.T, app *privateApp) string {
	t.Helper()
	res, err := httpClient.Post(app.URL+"/ticket", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out struct{ Ticket string }
	if err := json.Unmarshal(b, &out); err != nil || out.Ticket == "" {
		t.Fatalf("app ticket: %d", res.StatusCode)
	}
	return out.Ticket
}
