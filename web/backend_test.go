package web

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestOperatorPageShowsTheBackend: the operator page shows the log's backend and
// whether it answers, from /admin/stats's backend field: the embedded log up, and a
// Redis nobody listens on down.
func TestOperatorPageShowsTheBackend(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadRedis := "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close() // nothing listens there now
	for _, c := range []struct {
		name, kind, up, tone string
		args                 []string
	}{
		{"embedded", "memory", "true", "ok", nil},
		{"redis down", "redis", "false", "bad", []string{"--redis", deadRedis, "--redis-timeout", "300ms"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw := startGateway(t, c.args...)
			ctx, tab := newTab(t)
			do(t, ctx, chromedp.Navigate(gw.adminURL("/?interval=300")))
			b := `document.getElementById('backend')`
			waitFor(t, ctx, "the page to show the backend",
				b+`.dataset.kind === '`+c.kind+`' && `+b+`.dataset.up === '`+c.up+`' && `+b+`.dataset.tone === '`+c.tone+`'`,
				b+`?.outerHTML`, 10*time.Second)
			for _, e := range tab.errors() {
				t.Errorf("console: %v", e)
			}
		})
	}
}
