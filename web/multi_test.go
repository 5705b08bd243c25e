package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestModuleMultiRoomResumes: a page follows three rooms on one stream with
// roomcast.js. The gateway sheds it twice: the first time its reconnects are
// refused, so the browser gives up and the module recreates the source from a
// token built from its per-room cursors; the second time the browser reconnects
// by itself with the token as Last-Event-ID. Every event of every room arrives
// once, in per-room order, on one connection at a time.
func TestModuleMultiRoomResumes(t *testing.T) {
	gw := startGateway(t)
	px := newFrontProxy(t, gw)
	ctx, _ := newTab(t)
	rooms := []string{"mx-c", "mx-a", "mx-b"}

	do(t, ctx, chromedp.Navigate(px.srv.URL+"/__harness"))
	eval[bool](t, ctx, fmt.Sprintf(`(async (rooms) => {
		const { subscribe } = await import('/roomcast.js');
		const rec = window.rc = { events: [], resyncs: [], gaps: [], states: [], urls: [], errors: [] };
		window.ended = () => rec.states.filter((s) => s === 'reconnecting:ended').length;
		rec.sub = subscribe(rooms, {
			backoff: { base: 100, cap: 400 },
			healthyAfter: 1000,
			onEvent: (e) => rec.events.push(e.room + '@' + e.epoch + ':' + e.seq),
			onResync: (r) => rec.resyncs.push(r),
			onGap: (g) => rec.gaps.push(g),
			onState: (s, d) => {
				rec.states.push(d.reason ? s + ':' + d.reason : s);
				if (d.url && !rec.urls.includes(d.url)) rec.urls.push(d.url);
			},
			onError: (e) => rec.errors.push(e.message),
		});
		return true;
	})(%s)`, `["mx-c","mx-a","mx-b"]`))
	waitFor(t, ctx, "the stream to open", `rc.sub.state === 'open'`, harnessDiag, 10*time.Second)

	want := map[string][]string{}
	publishRound := func(n int) {
		for range n {
			for _, room := range rooms {
				p := gw.publish(room, map[string]string{"room": room})
				want[room] = append(want[room], room+"@"+p.ID)
			}
		}
	}
	total := func() int {
		n := 0
		for _, ids := range want {
			n += len(ids)
		}
		return n
	}
	publishRound(2)
	waitFor(t, ctx, "six events", fmt.Sprintf(`rc.events.length === %d`, total()), harnessDiag, 10*time.Second)

	// Shed, and refuse the browser's retries: the source goes CLOSED and the
	// module recreates it from its cursors.
	px.refuse(2)
	if n := gw.shed(100); n < 1 {
		t.Fatalf("shed closed %d streams", n)
	}
	waitFor(t, ctx, "the stream to end", `ended() === 1`, harnessDiag, 5*time.Second)
	publishRound(2)
	waitFor(t, ctx, "the recreated source and twelve events",
		fmt.Sprintf(`rc.events.length === %d && rc.sub.state === 'open' && rc.sub.stats.recreates >= 1`, total()),
		harnessDiag, 15*time.Second)

	// Shed again: the browser reconnects by itself, with the token as Last-Event-ID.
	gw.shed(100)
	waitFor(t, ctx, "the stream to end again", `ended() === 2`, harnessDiag, 5*time.Second)
	publishRound(1)
	waitFor(t, ctx, "fifteen events", fmt.Sprintf(`rc.events.length === %d && rc.sub.state === 'open'`, total()),
		harnessDiag, 10*time.Second)

	s := harness(t, ctx)
	for _, room := range rooms {
		var got []string
		for _, e := range s.Events {
			if strings.HasPrefix(e, room+"@") {
				got = append(got, e)
			}
		}
		if !slices.Equal(got, want[room]) {
			t.Errorf("room %s: delivered %v, want %v (each once, in order)", room, got, want[room])
		}
	}
	if len(s.Events) != total() || s.Stats.Duplicates != 0 || len(s.Gaps) != 0 || len(s.Resyncs) != 0 || len(s.Errors) != 0 {
		t.Errorf("the stream resent, lost or resynced: %+v", s)
	}
	reqs := px.requests()
	var recreated, header bool
	for _, r := range reqs {
		if r.Room != "mx-a,mx-b,mx-c" {
			t.Errorf("a stream request for rooms %q, want mx-a,mx-b,mx-c", r.Room)
		}
		if r.Status == http.StatusOK && r.Header == "" && strings.HasPrefix(r.Query, "m1.") {
			recreated = true
		}
		if r.Status == http.StatusOK && strings.HasPrefix(r.Header, "m1.") {
			header = true
		}
	}
	if !recreated || !header {
		t.Errorf("want a recreated source resuming by a lastEventId token (%v) and a browser reconnect by a Last-Event-ID token (%v); requests %+v",
			recreated, header, reqs)
	}
}

// TestDemoPageFollowsSeveralRooms: the demo page's multi-room card follows the
// rooms typed into it on one stream and shows each event with its room.
func TestDemoPageFollowsSeveralRooms(t *testing.T) {
	gw := startGateway(t)
	ctx, console := newTab(t)
	do(t, ctx, chromedp.Navigate(gw.url("/")))
	waitFor(t, ctx, "the demo page's modules", `document.getElementById('multi-form') !== null && document.readyState === 'complete'`,
		`document.readyState`, 10*time.Second)
	eval[bool](t, ctx, `(() => { document.getElementById('multi-rooms').value = 'demo-b, demo-a'; return true; })()`)
	do(t, ctx, chromedp.Click(chromedp.ID("multi-follow")))
	const diag = `document.getElementById('multi-state').textContent + ' | ' + document.getElementById('multi-log').innerText`
	waitFor(t, ctx, "the card to go live", `document.getElementById('multi-state').textContent === 'Live · 2 rooms'`, diag, 10*time.Second)
	// Order is kept within a room; across rooms a stream takes turns (a room's queue
	// may go first when both hold an event), so b is published once a is shown.
	a := gw.publish("demo-a", map[string]string{"text": "to a"})
	waitFor(t, ctx, "the first event", `document.querySelectorAll('#multi-log li[data-kind=event]').length === 1`, diag, 10*time.Second)
	b := gw.publish("demo-b", map[string]string{"text": "to b"})
	waitFor(t, ctx, "both events", `document.querySelectorAll('#multi-log li[data-kind=event]').length === 2`, diag, 10*time.Second)
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('#multi-log li[data-kind=event]')].map((li) => li.dataset.room + ':' + li.dataset.seq)`)
	if want := []string{fmt.Sprintf("demo-b:%d", b.Seq), fmt.Sprintf("demo-a:%d", a.Seq)}; !slices.Equal(got, want) {
		t.Errorf("the card shows %v, want %v (newest first)", got, want)
	}
	for _, e := range console.errors() {
		t.Errorf("console: %v", e)
	}
}
