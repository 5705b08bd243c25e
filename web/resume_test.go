package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// These tests run the whole path in Chromium: page, EventSource or
// roomcast.js, (proxy,) gateway process. Events are published from Go and
// identified by their ids, "<epoch>:<seq>".

// TestNativeEventSourceResumes: on the demo page, a plain EventSource whose
// stream the server ends (as a drain does) reconnects within the retry:
// range with Last-Event-ID, and the header wins over the stale lastEventId
// in its URL: nothing is lost or doubled.
func TestNativeEventSourceResumes(t *testing.T) {
	gw := startGateway(t)
	px := newFrontProxy(t, gw)
	ctx, _ := newTab(t)
	const room = "native"
	before := gw.publishN(room, 2)
	epoch := before[0].Epoch

	do(t, ctx, chromedp.Navigate(px.url("/#demo-side")))
	waitFor(t, ctx, "the demo page to go live", `document.getElementById('state').dataset.state === 'open'`,
		`document.getElementById('state').textContent`, 10*time.Second)
	// The URL resumes after seq 1; it stays in the URL for every reconnect.
	eval[bool](t, ctx, fmt.Sprintf(`(() => {
		const rec = window.native = { ids: [], opens: [], errors: [], last: '' };
		const es = new EventSource(%q);
		es.onopen = () => rec.opens.push(performance.now());
		es.onerror = () => rec.errors.push({ t: performance.now(), state: es.readyState, last: rec.last });
		es.onmessage = (e) => { rec.ids.push(e.lastEventId); rec.last = e.lastEventId; };
		return true;
	})()`, "/rooms/"+room+"/events?lastEventId="+url.QueryEscape(before[0].ID)))
	waitFor(t, ctx, "the replay of seq 2", `native.ids.length === 1`, `native`, 10*time.Second)

	gw.publishN(room, 2) // seq 3, 4: live
	waitFor(t, ctx, "live events 3 and 4", `native.ids.length === 3`, `native`, 10*time.Second)

	if n := gw.shed(100); n < 2 {
		t.Fatalf("shed closed %d streams, want the demo page's and the test's", n)
	}
	gw.publishN(room, 2) // seq 5, 6: most likely while the browser waits to reconnect
	waitFor(t, ctx, "the reconnect and events 5 and 6", `native.ids.length >= 5 && native.opens.length === 2`,
		`native`, 10*time.Second)

	type nativeState struct {
		IDs    []string
		Opens  []float64
		Errors []struct {
			T     float64
			State int
			Last  string
		}
	}
	rec := eval[nativeState](t, ctx, "native")
	want := ids(epoch, 2, 6)
	if !slices.Equal(rec.IDs, want) {
		t.Errorf("the EventSource received %v, want %v (each once, in order)", rec.IDs, want)
	}
	if len(rec.Errors) != 1 || rec.Errors[0].State != 0 {
		t.Fatalf("errors %+v: want one, in state CONNECTING (the browser retries by itself)", rec.Errors)
	}
	delay := time.Duration((rec.Opens[1] - rec.Errors[0].T) * float64(time.Millisecond))
	if delay < retryMin-30*time.Millisecond || delay > retryMax+time.Second {
		t.Errorf("reconnected %v after the stream ended; retry: was within [%v, %v]", delay, retryMin, retryMax)
	}
	// The reconnect carried the last id in the header, beside the stale query.
	reqs := px.requestsFor(room)
	if len(reqs) != 2 {
		t.Fatalf("proxy saw %d subscribe requests for %s, want 2: %+v", len(reqs), room, reqs)
	}
	if r := reqs[1]; r.Header != rec.Errors[0].Last || r.Query != before[0].ID {
		t.Errorf("reconnect had Last-Event-ID %q and lastEventId %q, want %q and %q",
			r.Header, r.Query, rec.Errors[0].Last, before[0].ID)
	}
}

// TestModuleRecreatesAfterRefusal: a 503 sends a native EventSource to
// CLOSED for good; roomcast.js recreates it after its backoff with
// lastEventId in the query, and the page ends with every event once. The
// recreated source's URL then holds a stale lastEventId, and on the
// browser's own reconnect the Last-Event-ID header wins over it.
func TestModuleRecreatesAfterRefusal(t *testing.T) {
	gw := startGateway(t)
	px := newFrontProxy(t, gw)
	ctx, _ := newTab(t)
	const room = "refused"

	px.refuse(1) // even the very first connect is refused
	do(t, ctx, chromedp.Navigate(px.url("/__harness")))
	installHarness(t, ctx, room, "")
	waitFor(t, ctx, "the module to recreate the refused source", `rc.sub.state === 'open'`, harnessDiag, 10*time.Second)
	if s := harness(t, ctx); s.Stats.Recreates < 1 || !slices.Contains(s.States, "reconnecting:closed") {
		t.Fatalf("after a refused first connect: %+v", s)
	}

	epoch := gw.publishN(room, 3)[0].Epoch
	waitFor(t, ctx, "events 1-3", `rc.events.length === 3`, harnessDiag, 10*time.Second)

	// The stream ends; the browser's retry is refused twice, so the source
	// goes CLOSED and the module takes over.
	px.refuse(2)
	gw.shed(100)
	// A publish racing the shed may still go out on the closing stream, so
	// wait until the page has seen the end.
	waitFor(t, ctx, "the stream to end", `ended() === 1`, harnessDiag, 5*time.Second)
	gw.publishN(room, 2) // 4, 5 while the page is away
	waitFor(t, ctx, "events 4 and 5 after the refusals", `rc.events.length === 5 && rc.sub.state === 'open'`,
		harnessDiag, 15*time.Second)
	gw.publishN(room, 1) // 6, live
	waitFor(t, ctx, "event 6", `rc.events.length === 6`, harnessDiag, 10*time.Second)

	// The browser's own reconnect, with the stale ?lastEventId=<3> in the URL.
	opens := harness(t, ctx).Stats.Opens
	gw.shed(100)
	waitFor(t, ctx, "the stream to end again", `ended() === 2`, harnessDiag, 5*time.Second)
	gw.publishN(room, 1) // 7
	waitFor(t, ctx, "event 7 after the reconnect", fmt.Sprintf(`rc.events.length === 7 && rc.sub.stats.opens === %d`, opens+1),
		harnessDiag, 10*time.Second)

	s := harness(t, ctx)
	if want := ids(epoch, 1, 7); !slices.Equal(s.Events, want) {
		t.Errorf("delivered %v, want %v", s.Events, want)
	}
	if s.Stats.Duplicates != 0 || len(s.Gaps) != 0 || len(s.Resyncs) != 0 || len(s.Errors) != 0 {
		t.Errorf("the server resent or lost events: %+v", s)
	}
	id3, id6 := epoch+":3", epoch+":6"
	if want := "lastEventId=" + url.QueryEscape(id3); !strings.Contains(s.URL, want) {
		t.Errorf("the recreated source's URL is %s, want it to contain %s", s.URL, want)
	}

	reqs := px.requestsFor(room)
	seen := func(status int, header, query string) bool {
		return slices.ContainsFunc(reqs, func(r subscribeRequest) bool {
			return r.Status == status && r.Header == header && r.Query == query
		})
	}
	checks := []struct {
		what          string
		status        int
		header, query string
	}{
		{"the browser's retry after the first shed, refused", http.StatusServiceUnavailable, id3, ""},
		{"the module's recreated source, refused", http.StatusServiceUnavailable, "", id3},
		{"the module's recreated source, through", http.StatusOK, "", id3},
		{"the browser's retry after the second shed: header beside the stale query", http.StatusOK, id6, id3},
	}
	for _, c := range checks {
		if !seen(c.status, c.header, c.query) {
			t.Errorf("no subscribe request for %s (status %d, Last-Event-ID %q, lastEventId %q); requests: %+v",
				c.what, c.status, c.header, c.query, reqs)
		}
	}
}

// TestModuleResyncsAfterRestart: the gateway process stops and starts again
// on the same port. In memory mode that is a new history (a new epoch), so
// the page gets a resync rather than a silent mix of two histories, and
// then every new event once.
//
// Behind a proxy (as in production) the browser gets 502s while the process
// is down, which send a native EventSource to CLOSED: the module must
// recreate it with lastEventId. Connected directly, Chromium retries a
// refused connection by itself, with Last-Event-ID.
func TestModuleResyncsAfterRestart(t *testing.T) {
	requireGateway(t)
	for _, tt := range []struct {
		name    string
		proxied bool
		// failed is true once the browser has failed to reconnect.
		failed string
	}{
		{"behind a proxy", true, `rc.states.includes('reconnecting:closed')`},
		{"direct", false, `rc.states.filter((s) => s.startsWith('reconnecting')).length >= 2`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr, admin := freeAddr(t), freeAddr(t)
			g1 := startGatewayAt(t, addr, admin)
			origin := g1.url("")
			if tt.proxied {
				origin = newFrontProxy(t, g1).url("")
			}
			ctx, _ := newTab(t)
			const room = "restart"

			// The demo page follows the same room, beside the test's own
			// subscription.
			do(t, ctx, chromedp.Navigate(origin+"/#"+room))
			installHarness(t, ctx, room, "")
			waitFor(t, ctx, "the subscription to open", `rc.sub.state === 'open'`, harnessDiag, 10*time.Second)
			old := g1.publishN(room, 3)
			waitFor(t, ctx, "events 1-3", `rc.events.length === 3`, harnessDiag, 10*time.Second)

			g1.stop()
			waitFor(t, ctx, "the page to notice the stop", `rc.sub.state !== 'open'`, harnessDiag, 10*time.Second)
			// Let the browser fail to connect at least once while the process
			// is down.
			waitFor(t, ctx, "a failed reconnect", tt.failed, harnessDiag, 10*time.Second)

			g2 := startGatewayAt(t, addr, admin)
			waitFor(t, ctx, "the resync from the new process", `rc.resyncs.length === 1 && rc.sub.state === 'open'`,
				harnessDiag, 15*time.Second)
			// The demo page's own subscription (default backoff) must be back
			// too: whoever comes back after a publish resyncs past it.
			waitFor(t, ctx, "the demo page's resync", `document.getElementById('count-resyncs').textContent === '1' && `+
				`document.getElementById('state').dataset.state === 'open'`, `document.getElementById('log').innerText`,
				15*time.Second)
			fresh := g2.publishN(room, 2)
			if fresh[0].Epoch == old[0].Epoch {
				t.Fatalf("the restarted gateway kept epoch %s; an in-memory restart must start a new one", old[0].Epoch)
			}
			waitFor(t, ctx, "the new epoch's events", `rc.events.length === 5`, harnessDiag, 10*time.Second)

			s := harness(t, ctx)
			want := append(ids(old[0].Epoch, 1, 3), ids(fresh[0].Epoch, 1, 2)...)
			if !slices.Equal(s.Events, want) {
				t.Errorf("delivered %v, want %v", s.Events, want)
			}
			// The room has no history in the new process until its first
			// publish, so the resync may name no epoch yet.
			r := s.Resyncs[0]
			if r.Room != room || r.Previous == nil || *r.Previous != old[2].ID || r.Seq != 0 ||
				(r.Epoch != fresh[0].Epoch && r.Epoch != "") {
				t.Errorf("resync %+v, want room %s, previous %s, seq 0 in the new history", r, room, old[2].ID)
			}
			if s.Stats.Duplicates != 0 || len(s.Gaps) != 0 || len(s.Errors) != 0 {
				t.Errorf("after the restart: %+v", s)
			}
			resumed := slices.ContainsFunc(s.URLs, func(u string) bool {
				return strings.Contains(u, "lastEventId="+url.QueryEscape(old[2].ID))
			})
			if tt.proxied && (s.Stats.Recreates == 0 || !resumed) {
				t.Errorf("%d recreations, sources %v; want a recreated source resuming from %s",
					s.Stats.Recreates, s.URLs, old[2].ID)
			}
			t.Logf("%d recreations; states %v", s.Stats.Recreates, s.States)

			// The demo page says so too, and shows every event once.
			waitFor(t, ctx, "the demo page to show the resync and five events",
				`document.getElementById('count-resyncs').textContent === '1' && `+
					`document.querySelectorAll('#log li[data-kind=event]').length === 5`,
				`document.getElementById('log').innerText`, 10*time.Second)
			// Its notices agree: it never claims to have resumed a stream that
			// resynced, and says the history after its position was lost.
			lines := eval[[]string](t, ctx, demoSystemLines)
			lost := slices.ContainsFunc(lines, func(l string) bool {
				return strings.HasPrefix(l, "History was lost after "+old[2].ID+": continuing from ")
			})
			claimed := slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(strings.ToLower(l), "resumed") })
			if !lost || claimed {
				t.Errorf("the demo page says %q; want the history after %s said lost, and nothing said resumed", lines, old[2].ID)
			}
		})
	}
}

// harnessDiag is the page state a failing wait reports.
const harnessDiag = `window.rc && { ...rc, sub: undefined, state: rc.sub.state, url: rc.sub.url, stats: rc.sub.stats }`

// installHarness loads roomcast.js into the page and subscribes to room,
// recording every callback in window.rc. options is a JS object literal
// merged into the defaults (fast backoff).
func installHarness(t *testing.T, ctx context.Context, room, options string) {
	t.Helper()
	if options == "" {
		options = "{}"
	}
	eval[bool](t, ctx, fmt.Sprintf(`(async (room, options) => {
		const { subscribe } = await import('/roomcast.js');
		const rec = window.rc = { events: [], resyncs: [], gaps: [], states: [], urls: [], errors: [] };
		// ended counts the streams that ended with the browser retrying.
		window.ended = () => rec.states.filter((s) => s === 'reconnecting:ended').length;
		rec.sub = subscribe(room, {
			backoff: { base: 100, cap: 400 },
			healthyAfter: 1000,
			...options,
			onEvent: (e) => rec.events.push(e.id),
			onResync: (r) => rec.resyncs.push(r),
			onGap: (g) => rec.gaps.push(g),
			onState: (s, d) => {
				rec.states.push(d.reason ? s + ':' + d.reason : s);
				if (d.url && !rec.urls.includes(d.url)) rec.urls.push(d.url);
			},
			onError: (e) => rec.errors.push(e.message),
		});
		return true;
	})(%q, %s)`, room, options))
}

// harnessState is window.rc, as installHarness records it.
type harnessState struct {
	Events  []string
	Resyncs []struct {
		Room, Epoch string
		Seq         int
		Previous    *string
	}
	Gaps   []json.RawMessage
	States []string
	URLs   []string
	Errors []string
	State  string
	URL    string
	Stats  struct {
		Opens, Reconnects, Recreates, Events, Duplicates, Gaps, Resyncs int
	}
}

func harness(t *testing.T, ctx context.Context) harnessState {
	t.Helper()
	return eval[harnessState](t, ctx, harnessDiag)
}

// ids returns "<epoch>:<seq>" for seq from..to.
func ids(epoch string, from, to int) []string {
	var out []string
	for seq := from; seq <= to; seq++ {
		out = append(out, fmt.Sprintf("%s:%d", epoch, seq))
	}
	return out
}
