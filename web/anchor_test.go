package web

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// anchorData is the data of a single-room anchor for room at pub (or, for a
// room without history, 0).
func anchorData(room string, pub *published) (id, data string) {
	if pub == nil {
		return "0", fmt.Sprintf(`{"room":%q,"epoch":"","seq":0}`, room)
	}
	return pub.ID, fmt.Sprintf(`{"room":%q,"epoch":%q,"seq":%d}`, room, pub.Epoch, pub.Seq)
}

// TestNativeEventSourceKeepsTheAnchor: a plain EventSource whose stream ends
// after its anchor (retry: and event: anchor) and before any event hands the
// anchor to an anchor listener only, never to onmessage, reconnects with the
// anchor's id as Last-Event-ID, and so receives, in order and without a
// resync, what was published while it was reconnecting. In a room without
// history the anchor is "0".
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
			var last *published
			if tc.history > 0 {
				last = &gw.publishN(tc.room, tc.history)[tc.history-1]
			}
			anchor, data := anchorData(tc.room, last)
			eval[bool](t, ctx, fmt.Sprintf(`(() => {
				const rec = window.native = { ids: [], types: [], anchors: [], opens: 0, errors: 0 };
				const es = window.nativeES = new EventSource(%q);
				es.onopen = () => rec.opens++;
				es.onerror = () => rec.errors++;
				const seen = (e) => { rec.ids.push(e.lastEventId); rec.types.push(e.type); };
				es.onmessage = seen;
				es.addEventListener('resync', seen);
				es.addEventListener('anchor', (e) => rec.anchors.push({ id: e.lastEventId, data: e.data }));
				return true;
			})()`, "/rooms/"+tc.room+"/events"))
			t.Cleanup(func() { eval[bool](t, ctx, `(nativeES.close(), true)`) })
			waitFor(t, ctx, "the stream to open and anchor", `native.opens === 1 && native.anchors.length === 1`, `native`, 10*time.Second)

			held := px.hold(t)
			if n := gw.shed(100); n < 1 {
				t.Fatalf("shed closed %d streams", n)
			}
			held.arrived(t)
			missed := gw.publishN(tc.room, 2)
			held.release()
			waitFor(t, ctx, "the reconnect and the events published meanwhile", `native.ids.length >= 2 && native.opens === 2`,
				`native`, 10*time.Second)
			live := gw.publishN(tc.room, 1)
			waitFor(t, ctx, "the live event", `native.ids.length >= 3`, `native`, 10*time.Second)

			type nativeState struct {
				IDs, Types []string
				Anchors    []struct{ ID, Data string }
			}
			rec := eval[nativeState](t, ctx, "native")
			want := []string{missed[0].ID, missed[1].ID, live[0].ID}
			if !slices.Equal(rec.IDs, want) || !slices.Equal(rec.Types, []string{"message", "message", "message"}) {
				t.Errorf("the EventSource dispatched %v %v, want only the messages %v", rec.Types, rec.IDs, want)
			}
			if len(rec.Anchors) != 1 || rec.Anchors[0].ID != anchor || rec.Anchors[0].Data != data {
				t.Errorf("anchors %+v, want one: id %s, data %s", rec.Anchors, anchor, data)
			}
			reqs := px.requestsFor(tc.room)
			if len(reqs) != 2 || reqs[0].Header != "" || reqs[1].Header != anchor {
				t.Fatalf("subscribe requests %+v: want the reconnect to carry Last-Event-ID %q", reqs, anchor)
			}
		})
	}
}

// TestModuleResumesFromTheAnchor: roomcast.js's source got only the anchor,
// then the stream ended and the browser's retry was refused, so the source
// went CLOSED. The module took the anchor's position, so the source it
// recreates resumes from there: what was published while it was away arrives,
// in order, with no resync (an unanchored one is only for a source that never
// got an anchor).
func TestModuleResumesFromTheAnchor(t *testing.T) {
	gw := startGateway(t)
	px := newFrontProxy(t, gw)
	ctx, _ := newTab(t)
	const room = "anchor-module"
	anchor := gw.publishN(room, 2)[1].ID
	do(t, ctx, chromedp.Navigate(px.url("/__harness")))
	installHarness(t, ctx, room, "")
	waitFor(t, ctx, "the subscription to open and take the anchor",
		fmt.Sprintf(`rc.sub.state === 'open' && rc.sub.lastEventId === %q`, anchor), harnessDiag, 10*time.Second)

	px.refuse(1) // the browser's own retry: the source goes CLOSED
	held := px.hold(t)
	gw.shed(100)
	held.arrived(t) // the module's recreated source
	away := gw.publishN(room, 2)
	held.release()
	waitFor(t, ctx, "the recreated source to open and replay", `rc.sub.state === 'open' && rc.events.length === 2`,
		harnessDiag, 15*time.Second)
	live := gw.publishN(room, 2)
	waitFor(t, ctx, "the live events", `rc.events.length === 4`, harnessDiag, 10*time.Second)

	s := harness(t, ctx)
	if want := []string{away[0].ID, away[1].ID, live[0].ID, live[1].ID}; !slices.Equal(s.Events, want) {
		t.Errorf("delivered %v, want %v", s.Events, want)
	}
	if len(s.Resyncs) != 0 || s.Stats.Recreates != 1 || s.Stats.Duplicates != 0 || len(s.Gaps) != 0 || len(s.Errors) != 0 {
		t.Errorf("after the recreate: %+v", s)
	}
	reqs := px.requestsFor(room)
	if len(reqs) != 3 || reqs[1].Status != 503 || reqs[1].Header != anchor || reqs[2].Query != anchor {
		t.Errorf("subscribe requests %+v: want the refused retry with Last-Event-ID %s, then the recreate with lastEventId %s",
			reqs, anchor, anchor)
	}
}
