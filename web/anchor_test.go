package web

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestNativeEventSourceKeepsTheAnchor: a plain EventSource whose stream gets only
// the anchor (retry: and an id-only block) before the server ends it dispatches no
// event for it, reconnects with that id as Last-Event-ID, and so receives what was
// published while it was away. In a room without history the anchor is "0".
func TestNativeEventSourceKeepsTheAnchor(t *testing.T) {
	gw := startGateway(t)
	px := newFrontProxy(t, gw)
	ctx, _ := newTab(t)
	do(t, ctx, chromedp.Navigate(px.url("/__harness")))
	for _, tc := range []struct {
		room    string
		history int
	}{
		{"anchored", 2},
		{"anchored-empty", 0},
	} {
		t.Run(tc.room, func(t *testing.T) {
			anchor := "0"
			if tc.history > 0 {
				anchor = gw.publishN(tc.room, tc.history)[tc.history-1].ID
			}
			eval[bool](t, ctx, fmt.Sprintf(`(() => {
				const rec = window.native = { ids: [], types: [], opens: 0, errors: 0 };
				const es = window.nativeES = new EventSource(%q);
				es.onopen = () => rec.opens++;
				es.onerror = () => rec.errors++;
				const seen = (e) => { rec.ids.push(e.lastEventId); rec.types.push(e.type); };
				es.onmessage = seen;
				es.addEventListener('resync', seen);
				return true;
			})()`, "/rooms/"+tc.room+"/events"))
			t.Cleanup(func() { eval[bool](t, ctx, `(nativeES.close(), true)`) })
			// The anchor goes out with the first write, which also carries the
			// response headers: once the source is open, it has been sent.
			waitFor(t, ctx, "the stream to open", `native.opens === 1`, `native`, 10*time.Second)
			if n := gw.shed(100); n < 1 {
				t.Fatalf("shed closed %d streams", n)
			}
			missed := gw.publishN(tc.room, 2)
			waitFor(t, ctx, "the reconnect and the events published meanwhile", `native.ids.length >= 2 && native.opens === 2`,
				`native`, 10*time.Second)

			type nativeState struct {
				IDs, Types []string
			}
			rec := eval[nativeState](t, ctx, "native")
			want := []string{missed[0].ID, missed[1].ID}
			if !slices.Equal(rec.IDs, want) || !slices.Equal(rec.Types, []string{"message", "message"}) {
				t.Errorf("the EventSource dispatched %v %v, want only the messages %v", rec.Types, rec.IDs, want)
			}
			reqs := px.requestsFor(tc.room)
			if len(reqs) != 2 || reqs[0].Header != "" || reqs[1].Header != anchor {
				t.Fatalf("subscribe requests %+v: want the reconnect to carry Last-Event-ID %q", reqs, anchor)
			}
		})
	}
}

// TestModuleAfterAnAnchorOnlyOpen: roomcast.js's source got only the anchor, then the
// stream ended and the browser's retry was refused, so the source went CLOSED. The
// module cannot read the anchor from an EventSource: its recreated source has no
// position, and once it is open the module reports an unanchored resync, so the
// application refetches its snapshot instead of silently missing what was published
// while it was away. Everything after that arrives once.
func TestModuleAfterAnAnchorOnlyOpen(t *testing.T) {
	gw := startGateway(t)
	px := newFrontProxy(t, gw)
	ctx, _ := newTab(t)
	const room = "anchor-module"
	gw.publishN(room, 2)
	do(t, ctx, chromedp.Navigate(px.url("/__harness")))
	installHarness(t, ctx, room, "")
	waitFor(t, ctx, "the subscription to open", `rc.sub.state === 'open'`, harnessDiag, 10*time.Second)

	px.refuse(1) // the browser's own retry: the source goes CLOSED
	gw.shed(100)
	waitFor(t, ctx, "the stream to end", `ended() === 1`, harnessDiag, 5*time.Second)
	away := gw.publishN(room, 2)
	waitFor(t, ctx, "the recreated source to open and report", `rc.sub.state === 'open' && rc.resyncs.length === 1`,
		harnessDiag, 15*time.Second)
	live := gw.publishN(room, 2)
	waitFor(t, ctx, "the live events", `rc.events.length === 2`, harnessDiag, 10*time.Second)

	s := harness(t, ctx)
	if r := s.Resyncs[0]; r.Room != room || r.Epoch != "" || r.Seq != 0 || r.Previous != nil ||
		!eval[bool](t, ctx, `rc.resyncs[0].unanchored === true`) {
		t.Errorf("resync %+v, want an unanchored one for %s", r, room)
	}
	if want := []string{live[0].ID, live[1].ID}; !slices.Equal(s.Events, want) {
		t.Errorf("delivered %v, want %v (published while away: %s, %s, covered by the resync)",
			s.Events, want, away[0].ID, away[1].ID)
	}
	if s.Stats.Recreates != 1 || s.Stats.Duplicates != 0 || len(s.Gaps) != 0 || len(s.Errors) != 0 {
		t.Errorf("after the recreate: %+v", s)
	}
}
