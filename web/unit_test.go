package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestModuleUnit runs the unit tests of roomcast.js (testdata/unit.js:
// backoff, ids, dedupe and gaps, the reconnect state machine) in Chromium.
// It needs no gateway: the module is served by Public itself.
func TestModuleUnit(t *testing.T) {
	requireBrowser(t)
	mux := http.NewServeMux()
	mux.Handle("/", Public())
	mux.Handle("/test/", http.StripPrefix("/test/", http.FileServer(http.Dir("testdata"))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx, console := newTab(t)
	do(t, ctx, chromedp.Navigate(srv.URL+"/test/unit.html"))
	waitFor(t, ctx, "the unit tests to finish", "window.unitResults", "document.body.innerText", 30*time.Second)

	type unitResults struct {
		Passed []string
		Failed []struct{ Name, Error string }
	}
	results := eval[unitResults](t, ctx, "window.unitResults")
	for _, f := range results.Failed {
		t.Errorf("roomcast.js: %s\n%s", f.Name, f.Error)
	}
	if len(results.Passed)+len(results.Failed) < 30 {
		t.Errorf("only %d unit tests ran", len(results.Passed)+len(results.Failed))
	}
	t.Logf("%d roomcast.js unit tests passed", len(results.Passed))
	for _, e := range console.errors() {
		t.Errorf("console: %v", e)
	}
}
