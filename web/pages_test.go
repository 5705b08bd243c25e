package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestDemoPage is what a new user sees after `go run ./cmd/gateway`: the
// page loads without a console error, goes live, publishes from the page
// (also with a custom type, which the page must start listening for) and
// shows each event with its seq.
func TestDemoPage(t *testing.T) {
	gw := startGateway(t)
	ctx, console := newTab(t)
	do(t, ctx, chromedp.Navigate(gw.url("/")))
	if title := eval[string](t, ctx, "document.title"); !strings.Contains(title, "roomcast") {
		t.Errorf("title %q", title)
	}
	waitFor(t, ctx, "the page to join the lobby and go live",
		`document.getElementById('state').dataset.state === 'open' && location.hash === '#lobby'`,
		`document.getElementById('state').textContent`, 10*time.Second)

	// Publish from the page.
	do(t, ctx,
		chromedp.SetValue(chromedp.ID("body"), `{"text": "first"}`),
		chromedp.Click(chromedp.ID("publish")),
	)
	// The event may well arrive before the answer to the publish.
	waitFor(t, ctx, "the first event on screen and the publish answer",
		`document.querySelector('#log li[data-kind=event][data-seq="1"]') && `+
			`document.getElementById('publish-result').innerText.includes('Published #1')`,
		`[document.getElementById('publish-result').innerText, document.getElementById('log').innerText]`, 10*time.Second)

	// A custom type: EventSource only delivers types it listens for, so the
	// page resubscribes (from its position) before publishing.
	do(t, ctx,
		chromedp.SetValue(chromedp.ID("body"), "plain text, sent as text/plain"),
		chromedp.SetValue(chromedp.ID("type"), "note"),
		chromedp.Click(chromedp.ID("publish")),
	)
	// And one from a backend.
	waitFor(t, ctx, "the typed event", `document.querySelector('#log li[data-seq="2"][data-type=note]')`,
		`document.getElementById('log').innerText`, 10*time.Second)
	third := gw.publish("lobby", map[string]string{"text": "from a backend"})
	waitFor(t, ctx, "the backend's event", `document.querySelector('#log li[data-seq="3"]')`,
		`document.getElementById('log').innerText`, 10*time.Second)

	type row struct {
		Seq, Type, Body string
	}
	rows := eval[[]row](t, ctx, `[...document.querySelectorAll('#log li[data-kind=event]')].map((li) => ({
		seq: li.dataset.seq, type: li.dataset.type, body: li.querySelector('.body').textContent }))`)
	want := []row{
		{"3", "message", `{"text":"from a backend"}`},
		{"2", "note", "noteplain text, sent as text/plain"},
		{"1", "message", `{"text":"first"}`},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("event rows (newest first)\n got %v\nwant %v", rows, want)
	}
	facts := eval[map[string]string](t, ctx, `({
		position: document.getElementById('position').textContent,
		events: document.getElementById('count-events').textContent,
		gaps: document.getElementById('count-gaps').textContent,
		resyncs: document.getElementById('count-resyncs').textContent })`)
	wantFacts := map[string]string{"position": third.ID, "events": "3", "gaps": "0", "resyncs": "0"}
	if fmt.Sprint(facts) != fmt.Sprint(wantFacts) {
		t.Errorf("facts %v, want %v", facts, wantFacts)
	}
	if snippet := eval[string](t, ctx, `document.getElementById('snippet-follow').textContent`); snippet != "curl -N "+gw.url("/rooms/lobby/events") {
		t.Errorf("follow snippet %q", snippet)
	}

	screenshot(t, ctx, "demo.png")
	for _, e := range console.errors() {
		t.Errorf("console: %v", e)
	}
	if testing.Verbose() {
		for _, e := range console.all() {
			t.Logf("console: %v", e)
		}
	}
}

// TestDemoPagePublishRefused: on a gateway that wants a token, publishing
// from the page shows the gateway's error JSON plainly, and works once the
// token is filled in.
func TestDemoPagePublishRefused(t *testing.T) {
	gw := startGateway(t, "--publish-token", "s3cret")
	// What the gateway answers to a publish without the token.
	res, err := httpClient.Post(gw.url("/rooms/lobby/events"), "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var refusal struct{ Error, Message string }
	json.NewDecoder(res.Body).Decode(&refusal)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || refusal.Error == "" {
		t.Fatalf("publish without a token: %d %+v, want 401 with an error JSON", res.StatusCode, refusal)
	}

	ctx, _ := newTab(t)
	do(t, ctx, chromedp.Navigate(gw.url("/")))
	waitFor(t, ctx, "the page to go live", `document.getElementById('state').dataset.state === 'open'`,
		`document.getElementById('state').textContent`, 10*time.Second)
	do(t, ctx, chromedp.Click(chromedp.ID("publish")))
	waitFor(t, ctx, "the error", `document.getElementById('publish-result').dataset.tone === 'bad'`,
		`document.getElementById('publish-result').innerText`, 10*time.Second)
	shown := eval[string](t, ctx, `document.getElementById('publish-result').innerText`)
	for _, part := range []string{"401", refusal.Error, refusal.Message, "Token"} {
		if !strings.Contains(shown, part) {
			t.Errorf("the page shows %q; want it to mention %q", shown, part)
		}
	}
	screenshot(t, ctx, "demo-publish-refused.png")

	do(t, ctx,
		chromedp.SetValue(chromedp.ID("token"), "s3cret"),
		chromedp.Click(chromedp.ID("publish")),
	)
	waitFor(t, ctx, "the event after publishing with the token", `document.querySelector('#log li[data-seq="1"]')`,
		`document.getElementById('publish-result').innerText`, 10*time.Second)
}

// TestOperatorPage: the operator page shows what /admin/stats returns,
// refreshes on its own, and drains only after a confirmation.
func TestOperatorPage(t *testing.T) {
	// A long drain delay keeps the drained pod up long enough to look at.
	gw := startGateway(t, "--drain-delay", "2s", "--drain-timeout", "4s")
	openStream(t, gw, "alpha")
	openStream(t, gw, "alpha")
	openStream(t, gw, "beta")
	// A stream joins its room just after its first frame: publish once all
	// three are members, so each gets every event.
	waitStats(t, gw, func(s adminStats) bool { return s.Connections == 3 })
	gw.publishN("alpha", 3)
	gw.publishN("beta", 1)
	want := waitStats(t, gw, func(s adminStats) bool { return s.Connections == 3 && s.Delivered == 7 })

	ctx, tab := newTab(t)
	do(t, ctx, chromedp.Navigate(gw.adminURL("/?interval=300")))
	waitFor(t, ctx, "the page to show a ready pod", `document.getElementById('pod-state').dataset.state === 'ready'`,
		`document.body.innerText`, 10*time.Second)
	assertShown(t, ctx, want)
	// This gateway has no admin token: the page never shows a prompt for one.
	promptHidden := func() {
		t.Helper()
		if eval[bool](t, ctx, rendered("token-form")) {
			t.Errorf("the admin token prompt is on screen, but this gateway asks for no token")
		}
	}
	promptHidden()

	// It refreshes on its own.
	openStream(t, gw, "gamma")
	waitStats(t, gw, func(s adminStats) bool { return s.Connections == 4 })
	gw.publish("gamma", "hello")
	want = waitStats(t, gw, func(s adminStats) bool { return s.Connections == 4 && s.Delivered == 8 })
	waitFor(t, ctx, "the page to show the new stream without a reload",
		`document.querySelector('output[data-stat=connections]').dataset.value === '4' && `+
			`document.querySelector('output[data-stat=delivered]').dataset.value === '8'`,
		`document.body.innerText`, 10*time.Second)
	assertShown(t, ctx, want)
	promptHidden()
	screenshot(t, ctx, "operator.png")

	// Draining asks first; cancelling changes nothing.
	do(t, ctx, chromedp.Click(chromedp.ID("drain")))
	waitFor(t, ctx, "the confirmation", `document.getElementById('confirm').open`, "", 5*time.Second)
	if n := eval[string](t, ctx, `document.getElementById('confirm-connections').textContent`); n != "4" {
		t.Errorf("the confirmation names %s open streams, want 4", n)
	}
	polls := tab.sent("GET " + gw.adminURL("/admin/stats"))
	do(t, ctx, chromedp.Click(chromedp.ID("confirm-cancel")))
	waitFor(t, ctx, "the confirmation to close", `!document.getElementById('confirm').open`, "", 5*time.Second)
	// A drain would be sent as the dialog closes, well before the next poll.
	replaytest.Eventually(t, 5*time.Second, "two more stats polls", func() bool {
		return tab.sent("GET "+gw.adminURL("/admin/stats")) >= polls+2
	})
	if n := tab.sent("POST " + gw.adminURL("/admin/drain")); n != 0 {
		t.Fatalf("cancelling sent %d drain requests", n)
	}
	if s := gw.stats(); s.State != "ready" {
		t.Fatalf("after cancelling, the pod is %s", s.State)
	}

	do(t, ctx, chromedp.Click(chromedp.ID("drain")))
	waitFor(t, ctx, "the confirmation", `document.getElementById('confirm').open`, "", 5*time.Second)
	do(t, ctx, chromedp.Click(chromedp.ID("confirm-drain")))
	waitFor(t, ctx, "the page to show the drain", `document.getElementById('pod-state').dataset.state === 'draining' && `+
		`document.getElementById('drain-result').dataset.tone === 'ok' && document.getElementById('drain').disabled`,
		`document.body.innerText`, 5*time.Second)
	if s := gw.stats(); s.State != "draining" {
		t.Errorf("after confirming, the pod is %s, want draining", s.State)
	}
	if n := tab.sent("POST " + gw.adminURL("/admin/drain")); n != 1 {
		t.Errorf("confirming sent %d drain requests, want 1", n)
	}
	for _, e := range tab.errors() {
		t.Errorf("console: %v", e)
	}
}

// assertShown checks that the operator page shows the stable numbers of s.
func assertShown(t *testing.T, ctx context.Context, s adminStats) {
	t.Helper()
	drops := 0
	for _, n := range s.Drops {
		drops += n
	}
	ints := map[string]int{
		"connections": s.Connections, "rooms": s.Rooms, "subscriptions": s.Subscriptions,
		"published": s.Published, "delivered": s.Delivered, "drops_total": drops,
	}
	cond := []string{`document.getElementById('pod-state').dataset.state === ` + jsString(s.State)}
	for k, v := range ints {
		cond = append(cond, fmt.Sprintf(`document.querySelector('output[data-stat=%s]').textContent === '%d'`, k, v))
	}
	waitFor(t, ctx, fmt.Sprintf("the page to show %+v", s), strings.Join(cond, " && "),
		`Object.fromEntries([...document.querySelectorAll('output[data-stat]')].map((o) => [o.dataset.stat, o.textContent]))`,
		5*time.Second)

	shown := eval[struct {
		Rates map[string]float64
		Drops map[string]string
	}](t, ctx, `({
		rates: Object.fromEntries([...document.querySelectorAll('output[data-stat$=_per_second]')].map((o) => [o.dataset.stat, Number(o.dataset.value)])),
		drops: Object.fromEntries([...document.querySelectorAll('#drops tr')].map((tr) => [tr.dataset.reason, tr.cells[1].textContent])) })`)
	// Rates move between two reads; they must be the gateway's, not zero.
	for k, v := range map[string]float64{"connects_per_second": s.ConnectsPerSecond, "resumes_per_second": s.ResumesPerSecond} {
		if got, ok := shown.Rates[k]; !ok || math.Abs(got-v) > math.Max(0.5, v/2) {
			t.Errorf("%s shown as %v (present %v), gateway says %v", k, got, ok, v)
		}
	}
	if len(shown.Drops) != len(s.Drops) {
		t.Errorf("drops shown %v, gateway says %v", shown.Drops, s.Drops)
	}
	for reason, n := range s.Drops {
		if shown.Drops[reason] != fmt.Sprint(n) {
			t.Errorf("drops[%s] shown as %q, gateway says %d", reason, shown.Drops[reason], n)
		}
	}
}

// waitStats polls /admin/stats until ok accepts it.
func waitStats(t *testing.T, g *gateway, ok func(adminStats) bool) adminStats {
	t.Helper()
	var s adminStats
	replaytest.Eventually(t, 10*time.Second, "stats reach the expected values", func() error {
		if s = g.stats(); !ok(s) {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	})
	return s
}

// openStream holds a subscription open from Go until the test ends (or the
// gateway ends it), reading and discarding its frames.
func openStream(t *testing.T, g *gateway, room string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url("/rooms/"+room+"/events"), nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	res, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("subscribing to %s: %v", room, err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("subscribing to %s: status %d", room, res.StatusCode)
	}
	// The first frame is the retry hint: the stream is established.
	frames := bufio.NewReader(res.Body)
	if _, err := frames.ReadString('\n'); err != nil {
		cancel()
		t.Fatalf("reading %s: %v", room, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(io.Discard, frames) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		res.Body.Close()
		client.CloseIdleConnections()
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chartView is what one of the operator page's charts shows.
type chartView struct {
	Max, Min         string    // the scale's labels (data-value)
	MaxText, MinText string    // as shown
	Labelled         bool      // both labels are laid out on screen
	Caption          string    // what is plotted over which window
	Ys               []float64 // the line's y coordinates, oldest first (0 is the top, 28 the bottom)
}

const chartsJS = `Object.fromEntries([...document.querySelectorAll('svg[data-spark]')].map((svg) => {
	const chart = svg.closest('.chart');
	const label = (cls) => chart?.querySelector('.' + cls);
	const onScreen = (el) => Boolean(el) && el.offsetParent !== null && el.getBoundingClientRect().height > 0;
	const ys = (svg.querySelector('polyline')?.getAttribute('points') ?? '').split(' ').filter(Boolean).map((p) => Number(p.split(',')[1]));
	return [svg.dataset.spark, {
		max: label('y-max')?.dataset.value ?? '', min: label('y-min')?.dataset.value ?? '',
		maxText: label('y-max')?.textContent ?? '', minText: label('y-min')?.textContent ?? '',
		labelled: onScreen(label('y-max')) && onScreen(label('y-min')),
		caption: svg.closest('.tile').querySelector('.caption')?.textContent ?? '', ys }];
}))`

// TestOperatorPageCharts: each chart on the operator page has a scale a person
// can read (numeric labels for its top and bottom, a caption), its line moves
// when the numbers do, and a counter is charted as a rate: after a burst of
// publishes its line comes back down to zero.
func TestOperatorPageCharts(t *testing.T) {
	gw := startGateway(t)
	ctx, tab := newTab(t)
	do(t, ctx, chromedp.Navigate(gw.adminURL("/?interval=250")))
	waitFor(t, ctx, "the page to chart a few samples",
		`document.getElementById('pod-state').dataset.state === 'ready' && `+
			`document.querySelectorAll('svg[data-spark] polyline').length === 8`, chartsJS, 10*time.Second)

	openStream(t, gw, "charts")
	gw.publishN("charts", 30)
	published := `(() => { const ys = charts.published.ys; return ys.length > 2 && Math.min(...ys) < 27 && ys.at(-1) === 27; })()`
	waitFor(t, ctx, "the published chart to rise with the burst and come back to zero after it",
		`(() => { const charts = `+chartsJS+`; return `+published+` && new Set(charts.connections.ys).size > 1; })()`,
		chartsJS, 15*time.Second)

	charts := eval[map[string]chartView](t, ctx, chartsJS)
	if len(charts) != 8 {
		t.Fatalf("%d charts, want 8: %v", len(charts), charts)
	}
	for key, c := range charts {
		hi, errHi := strconv.ParseFloat(c.Max, 64)
		lo, errLo := strconv.ParseFloat(c.Min, 64)
		if errHi != nil || errLo != nil || !(hi > lo) || !c.Labelled || c.MaxText == "" || c.MinText == "" {
			t.Errorf("chart %s: scale %q (%q) to %q (%q), on screen %v; want numeric labels, top above bottom",
				key, c.Min, c.MinText, c.Max, c.MaxText, c.Labelled)
		}
		if !strings.Contains(c.Caption, "last") {
			t.Errorf("chart %s: caption %q does not say its window", key, c.Caption)
		}
		for _, y := range c.Ys {
			if y < 0 || y > 28 {
				t.Errorf("chart %s: point at y=%v, outside the chart", key, y)
			}
		}
	}
	if c := charts["published"]; !strings.Contains(c.Caption, "per second") {
		t.Errorf("the published chart's caption %q does not say it plots a rate", c.Caption)
	}
	// The top of a chart is a round number just above its peak.
	if c := charts["connections"]; c.Max != "2" || c.Min != "0" {
		t.Errorf("connections (0 then 1) charted from %s to %s, want 0 to 2", c.Min, c.Max)
	}
	if c := charts["rooms"]; c.Min != "0" || c.Max == "" {
		t.Errorf("rooms charted from %s to %s", c.Min, c.Max)
	}
	screenshot(t, ctx, "operator-charts.png")
	for _, e := range tab.errors() {
		t.Errorf("console: %v", e)
	}
}

// demoSystemLines is a JavaScript expression: the demo page's system lines
// (connection changes, resyncs, gaps), oldest first.
const demoSystemLines = `[...document.querySelectorAll('#log li[data-kind=sys]')].map((li) => li.dataset.text).reverse()`

// TestDemoPageRefusesReservedTypes: a type the gateway keeps for itself (its own
// frames in any case, EventSource's own events) typed into the demo page's
// publish form is refused in the form, with the reason; the page neither
// publishes nor starts listening for it.
func TestDemoPageRefusesReservedTypes(t *testing.T) {
	gw := startGateway(t)
	ctx, tab := newTab(t)
	do(t, ctx, chromedp.Navigate(gw.url("/")))
	waitFor(t, ctx, "the page to go live", `document.getElementById('state').dataset.state === 'open'`,
		`document.getElementById('state').textContent`, 10*time.Second)
	streams := tab.sent("GET " + gw.url("/rooms/lobby/events"))
	for _, typ := range []string{"resync", "Reauth", "anchor", "error", "open"} {
		do(t, ctx,
			chromedp.SetValue(chromedp.ID("type"), typ),
			chromedp.Click(chromedp.ID("publish")),
		)
		waitFor(t, ctx, "the refusal of "+typ,
			`document.getElementById('publish-result').dataset.tone === 'bad' && `+
				`document.getElementById('publish-result').innerText.includes(`+jsString(`"`+typ+`"`)+`) && `+
				`document.getElementById('publish-result').innerText.includes('reserved') && `+
				`document.getElementById('type').hasAttribute('aria-invalid')`,
			`document.getElementById('publish-result').innerText`, 5*time.Second)
		if !eval[bool](t, ctx, rendered("publish-result")) {
			t.Errorf("the refusal of %s is not on screen", typ)
		}
	}
	screenshot(t, ctx, "demo-reserved-type.png")
	if lines := eval[[]string](t, ctx, demoSystemLines); slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "listening") }) {
		t.Errorf("the page started listening for a reserved type: %q", lines)
	}
	if n := tab.sent("POST " + gw.url("/rooms/")); n != 0 {
		t.Errorf("the page sent %d publishes with a reserved type", n)
	}
	if n := tab.sent("GET " + gw.url("/rooms/lobby/events")); n != streams {
		t.Errorf("the page reopened its stream %d times for a reserved type", n-streams)
	}

	// A type of its own still goes out, once corrected.
	do(t, ctx, chromedp.SetValue(chromedp.ID("type"), "resynced"), chromedp.Click(chromedp.ID("publish")))
	waitFor(t, ctx, "the typed event", `document.querySelector('#log li[data-seq="1"][data-type=resynced]')`,
		`[document.getElementById('publish-result').innerText, document.getElementById('log').innerText]`, 10*time.Second)
	for _, e := range tab.errors() {
		t.Errorf("console: %v", e)
	}
}

// TestDemoPageResumeNotice: when its stream ends, the demo page says it
// reconnected and asks to resume, and says it resumed only once the first
// event after the reconnect continues from where it was.
func TestDemoPageResumeNotice(t *testing.T) {
	gw := startGateway(t)
	ctx, _ := newTab(t)
	const room = "notice"
	do(t, ctx, chromedp.Navigate(gw.url("/#"+room)))
	waitFor(t, ctx, "the page to go live", `document.getElementById('state').dataset.state === 'open'`,
		`document.getElementById('state').textContent`, 10*time.Second)
	before := gw.publishN(room, 2)
	waitFor(t, ctx, "events 1 and 2", `document.querySelectorAll('#log li[data-kind=event]').length === 2`,
		`document.getElementById('log').innerText`, 10*time.Second)

	if n := gw.shed(100); n != 1 {
		t.Fatalf("shed closed %d streams, want the page's", n)
	}
	waitFor(t, ctx, "the reconnect", `document.getElementById('count-reconnects').textContent === '1' && `+
		`document.getElementById('state').dataset.state === 'open'`, demoSystemLines, 10*time.Second)
	asking := "Reconnected; resuming after " + before[1].ID + "…"
	if lines := eval[[]string](t, ctx, demoSystemLines); lines[len(lines)-1] != asking {
		t.Fatalf("after the reconnect the page says %q, want %q last", lines, asking)
	}
	gw.publish(room, "after the reconnect")
	waitFor(t, ctx, "event 3", `document.querySelector('#log li[data-kind=event][data-seq="3"]')`,
		`document.getElementById('log').innerText`, 10*time.Second)
	lines := eval[[]string](t, ctx, demoSystemLines)
	want := []string{"Connected to room " + room + ".", "Stream ended; the browser reconnects on its own.", asking,
		"Resumed after " + before[1].ID + ": nothing was missed."}
	if !slices.Equal(lines, want) {
		t.Errorf("the page says\n%q\nwant\n%q", lines, want)
	}
}
