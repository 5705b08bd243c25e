package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestModuleReportsExpired: an event published with a short Event-TTL and
// replayed after it comes as `event: expired`; the module passes it to
// onExpired (its room, epoch, seq and id), never to onEvent, counts it, and
// moves the position on, so the event after it is no gap.
func TestModuleReportsExpired(t *testing.T) {
	gw := startGateway(t)
	px := newFrontProxy(t, gw)
	ctx, _ := newTab(t)
	do(t, ctx, chromedp.Navigate(px.url("/__harness")))
	const room = "rig-0414"
	first := gw.publish(room, map[string]int{"n": 1})
	var cmd published
	gw.call(http.MethodPost, gw.url("/rooms/"+url.PathEscape(room)+"/events"), "application/json", []byte(`"reboot"`),
		http.StatusCreated, &cmd, "Event-TTL", "1ms")
	// Its deadline is at most 1ms after the answer: wait for the clock to pass it.
	time.Sleep(2 * time.Millisecond)
	last := gw.publish(room, map[string]int{"n": 3})

	installHarness(t, ctx, room, fmt.Sprintf(`{ lastEventId: %q, onExpired: (x) => (window.expired = window.expired || []).push(x) }`, first.ID))
	waitFor(t, ctx, "the marker and the event after it", `rc.events.length >= 1 && (window.expired || []).length >= 1`,
		harnessDiag, 10*time.Second)
	type expired struct {
		Room, Epoch, ID string
		Seq             int
	}
	got := eval[[]expired](t, ctx, `window.expired`)
	if want := (expired{Room: room, Epoch: cmd.Epoch, ID: cmd.ID, Seq: cmd.Seq}); len(got) != 1 || got[0] != want {
		t.Errorf("onExpired got %+v, want %+v", got, want)
	}
	h := harness(t, ctx)
	if !slices.Equal(h.Events, []string{last.ID}) || len(h.Gaps) != 0 || len(h.Resyncs) != 0 || len(h.Errors) != 0 {
		t.Errorf("events %v, gaps %s, resyncs %v, errors %v; want only %s", h.Events, h.Gaps, h.Resyncs, h.Errors, last.ID)
	}
	if n := eval[int](t, ctx, `rc.sub.stats.expired`); n != 1 {
		t.Errorf("stats.expired %d, want 1", n)
	}
}
