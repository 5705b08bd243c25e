package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/roomcast/roomcast/replay/polltest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// One headless Chromium serves the whole package; each test gets its own tab
// in its own browser context (no shared cookies, cache or storage).
var chrome struct {
	once   sync.Once
	ctx    context.Context // the browser's chromedp context
	stop   func()
	err    error
	output replaytest.SyncBuffer // the browser's output, for failures to start
}

func startBrowser() {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(env.chromium),
		chromedp.UserDataDir(filepath.Join(env.tmp, "chromium-profile")),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(&chrome.output),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	chrome.ctx = ctx
	chrome.stop = func() {
		stopCtx, stopCancel := context.WithTimeout(ctx, 10*time.Second)
		defer stopCancel()
		chromedp.Cancel(stopCtx)
		cancel()
		allocCancel()
	}
	// The first Run starts the browser and binds it to ctx, which has no
	// deadline; the timeout only bounds this start.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case chrome.err = <-started:
	case <-time.After(30 * time.Second):
		chrome.err = fmt.Errorf("no answer from the browser within 30s")
	}
	if chrome.err != nil {
		chrome.err = fmt.Errorf("%w\nbrowser output:\n%s", chrome.err, chrome.output.String())
	}
}

func stopBrowser() {
	if chrome.stop != nil {
		chrome.stop()
	}
}

// newTab opens a tab in a fresh browser context and starts recording its
// console and requests. The tab closes when the test ends, before servers started
// earlier in the test stop (cleanups run last-in first-out).
func newTab(t *testing.T) (context.Context, *tabLog) {
	t.Helper()
	requireBrowser(t)
	chrome.once.Do(startBrowser)
	if chrome.err != nil {
		t.Fatalf("starting Chromium: %v", chrome.err)
	}
	ctx, cancel := chromedp.NewContext(chrome.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(func() {
		closeCtx, closeCancel := context.WithTimeout(ctx, 5*time.Second)
		defer closeCancel()
		chromedp.Cancel(closeCtx)
		cancel()
	})
	tab := &tabLog{}
	if err := chromedp.Listen(ctx, tab.record); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return ctx, tab
}

// do runs actions with a bound.
func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(actx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) and decodes
// its value.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := evalErr[T](ctx, expr)
	if err != nil {
		t.Fatalf("evaluating %s: %v", short(expr), err)
	}
	return v
}

func evalErr[T any](ctx context.Context, expr string) (T, error) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(actx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// waitFor polls a JavaScript condition until it is true, for at most
// timeout. On failure it reports the value of diag, an expression that
// explains the page's state.
func waitFor(t *testing.T, ctx context.Context, what, cond, diag string, timeout time.Duration) {
	t.Helper()
	err := polltest.Until(timeout, func() error {
		ok, err := evalErr[bool](ctx, "Boolean("+cond+")")
		if err == nil && !ok {
			err = errors.New("false")
		}
		return err
	})
	if err == nil {
		return
	}
	state := "(no diagnostics)"
	if diag != "" {
		if raw, err := evalErr[[]byte](ctx, "JSON.stringify("+diag+")"); err == nil {
			state = string(raw)
		} else {
			state = err.Error()
		}
	}
	t.Fatalf("waiting for %s: %v; page state: %s", what, err, state)
}

// screenshot saves a full-page PNG into the artefacts directory and checks
// it decodes as a PNG of a sensible size.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(actx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 || len(buf) < 20_000 {
		t.Errorf("screenshot is %dx%d, %d bytes; want at least 800x600 and some content", b.Dx(), b.Dy(), len(buf))
	}
	path := filepath.Join(artifactsDir(t), name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// tabLog records what a tab writes to its console (console API calls,
// uncaught exceptions, browser log entries such as failed loads, CSP
// violations or invalid markup) and the requests it sends.
type tabLog struct {
	mu       sync.Mutex
	entries  []consoleEntry
	requests []string // "METHOD URL"
}

type consoleEntry struct {
	Level string // "error", "warning", "exception", …
	Text  string
	URL   string
}

func (e consoleEntry) String() string {
	return fmt.Sprintf("[%s] %s (%s)", e.Level, e.Text, e.URL)
}

// record is a chromedp listener: it runs on the tab's read loop, so it only
// appends under the lock.
func (c *tabLog) record(ev any) {
	var e consoleEntry
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		e.Level = string(ev.Type)
		var parts []string
		for _, a := range ev.Args {
			parts = append(parts, remoteText(a))
		}
		e.Text = strings.Join(parts, " ")
		if st := ev.StackTrace; st != nil && len(st.CallFrames) > 0 {
			e.URL = st.CallFrames[0].URL
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		e.Level, e.Text, e.URL = "exception", d.Text, d.URL
		if d.Exception != nil {
			e.Text += " " + d.Exception.Description
		}
	case *log.EventEntryAdded:
		e.Level, e.Text, e.URL = string(ev.Entry.Level), ev.Entry.Text, ev.Entry.URL
	case *network.EventRequestWillBeSent:
		c.mu.Lock()
		c.requests = append(c.requests, ev.Request.Method+" "+ev.Request.URL)
		c.mu.Unlock()
		return
	default:
		return
	}
	c.mu.Lock()
	c.entries = append(c.entries, e)
	c.mu.Unlock()
}

// errors returns the entries that are errors: console.error and
// console.assert, uncaught exceptions, and browser errors.
func (c *tabLog) errors() []consoleEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []consoleEntry
	for _, e := range c.entries {
		switch e.Level {
		case "error", "assert", "exception":
			out = append(out, e)
		}
	}
	return out
}

func (c *tabLog) all() []consoleEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]consoleEntry(nil), c.entries...)
}

// sent returns how many requests "METHOD URL" contain substr.
func (c *tabLog) sent(substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.requests {
		if strings.Contains(r, substr) {
			n++
		}
	}
	return n
}

func remoteText(o *runtime.RemoteObject) string {
	if o.Type == runtime.RemoteObjectTypeString {
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
	}
	if o.Description != "" {
		return o.Description
	}
	return string(o.Value)
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
