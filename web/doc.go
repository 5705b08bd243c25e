// Package web serves roomcast's browser side: the client module
// (roomcast.js and its TypeScript declarations), the demo page on the public
// listener and the operator page on the admin listener.
//
// Everything is embedded with go:embed and served as is: there is no build
// step, no framework and nothing loaded from another origin, so the pages
// work on a machine without internet access.
//
// What it owns:
//   - roomcast.js, a dependency-free ES module that wraps EventSource and
//     fills the gaps a native EventSource leaves: it recreates a source that
//     reached CLOSED (non-200, wrong content type, network failure) after a
//     capped full-jitter backoff, passes its position to the new source as
//     the lastEventId query parameter, drops duplicates by seq, reports gaps
//     and handles "event: resync"; "event: anchor" (where the gateway started
//     a stream) gives it a position before the first event. For private rooms
//     across origins it calls the page's getTicket() before every connect (a
//     ticket is good for one stream) and answers "event: reauth" with a fresh
//     ticket, from its cursor.
//   - Public: "/" (demo page), "/roomcast.js", "/roomcast.d.ts" and
//     "/assets/…".
//   - Admin: the operator page at "/" and its "/assets/…"; it reads
//     /admin/stats and posts /admin/drain, which the gateway serves.
//   - The browser end-to-end tests, which build and run the gateway binary
//     as a separate process and drive Chromium through chromedp, and the
//     interop test of the npm eventsource clients, which it drives under node.
//
// What it must not do: import any other roomcast package, or need a JavaScript
// build step to serve.
//
// Tests: the handler tests need nothing. The browser tests build
// ./cmd/gateway once, run it as a process per test on free loopback ports
// and drive headless Chromium through chromedp; roomcast.js's unit tests
// (testdata/unit.js) run in the same browser, so no Node tooling is needed
// for them. ROOMCAST_CHROMIUM names the browser (default: /usr/bin/chromium,
// then PATH); without one the browser tests are skipped, except under
// CI=true, where they fail. Screenshots go to $ROOMCAST_ARTIFACTS when it is
// set. The node interop test (eventsource_test.go) runs node from PATH with
// the npm clients testdata/eventsource/package.json lists, installed in the
// directory $ROOMCAST_EVENTSOURCE names (.ci/eventsource prints it); without
// them it is skipped, except under CI=true, where it fails.
//
// Concurrency: the handlers are stateless after package initialisation (the
// embedded files and their ETags are computed once) and safe for concurrent
// use.
package web
