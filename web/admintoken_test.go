package web

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestOperatorPageAdminToken: against a gateway with an admin token, the operator
// page asks for it, keeps it in the tab's sessionStorage, asks again after a wrong
// one, and sends it on its stats polls and its drain.
func TestOperatorPageAdminToken(t *testing.T) {
	const token = "adm-page-51f0"
	path := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, "--admin-token-file", path, "--drain-delay", "2s", "--drain-timeout", "4s")
	ctx, tab := newTab(t)
	do(t, ctx, chromedp.Navigate(gw.adminURL("/?interval=300")))
	const diag = `({text: document.body.innerText, stored: sessionStorage.getItem('roomcast.adminToken')})`
	waitFor(t, ctx, "the page to ask for the token", `!document.getElementById('token-form').hidden`, diag, 10*time.Second)

	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), "wrong-token"), chromedp.Click(chromedp.CSS("#token-form button")))
	waitFor(t, ctx, "the page to ask again after a wrong token",
		`!document.getElementById('token-form').hidden && sessionStorage.getItem('roomcast.adminToken') === null`, diag, 10*time.Second)

	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#token-form button")))
	waitFor(t, ctx, "the page to show a ready pod",
		`document.getElementById('pod-state').dataset.state === 'ready' && document.getElementById('token-form').hidden && `+
			`sessionStorage.getItem('roomcast.adminToken') === '`+token+`'`, diag, 10*time.Second)
	if n := tab.sent("POST " + gw.adminURL("/admin/drain")); n != 0 {
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
