package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestCrossOriginPageCannotPublishOrDrain: a page on another origin, in a real
// browser on the gateway's own machine (a loopback client, which may publish without
// a token), sends what a browser lets any page send without a preflight: a text/plain
// fetch, a form post, and a POST to the admin listener. None of them publishes,
// drains or sheds anything.
func TestCrossOriginPageCannotPublishOrDrain(t *testing.T) {
	gw := startGateway(t)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>elsewhere</title><iframe name="sink"></iframe>`)
	}))
	t.Cleanup(other.Close)

	ctx, _ := newTab(t)
	do(t, ctx, chromedp.Navigate(other.URL+"/"))
	// Each step resolves once the gateway has answered: a no-cors fetch when the
	// opaque response arrives, the form when its answer has loaded in the frame.
	attack := fmt.Sprintf(`(async () => {
		const out = [];
		for (const u of [%q, %q, %q, %q]) {
			const r = await fetch(u, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: '[{"room":"r","body":"pwned"}]'});
			out.push(r.type);
		}
		const frame = document.querySelector('iframe');
		const loaded = new Promise((resolve) => { frame.onload = resolve; });
		const form = document.createElement('form');
		form.method = 'POST';
		form.enctype = 'text/plain';
		form.action = %q;
		form.target = 'sink';
		const field = document.createElement('input');
		field.name = 'pwned';
		field.value = 'yes';
		form.appendChild(field);
		document.body.appendChild(form);
		form.submit();
		await loaded;
		out.push('form');
		return out;
	})()`, gw.url("/rooms/r/events"), gw.url("/events"), gw.adminURL("/admin/shed?count=10"), gw.adminURL("/admin/drain"),
		gw.url("/rooms/r/events"))
	if got := eval[[]string](t, ctx, attack); len(got) != 5 {
		t.Fatalf("the page's requests: %v", got)
	}
	if st := gw.stats(); st.Published != 0 || st.State != "ready" {
		t.Fatalf("after the other origin's requests: %d published, state %s", st.Published, st.State)
	}
	// The same gateway still takes a publish from a client that is not a browser.
	if p := gw.publish("r", map[string]string{"text": "fine"}); p.Seq != 1 {
		t.Fatalf("publish after the refusals: %+v", p)
	}
}
