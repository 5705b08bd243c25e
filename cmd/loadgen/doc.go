// Command loadgen is roomcast's benchmark, soak and loss-detection tool.
//
// It talks to a server over HTTP only: N subscribers hold one SSE stream each
// (subscriber i joins room <prefix><i%R>), publishers POST JSON bodies carrying their
// send time at a fixed total rate, and every subscriber checks that the seqs it
// receives are dense (no gap, no duplicate) across reconnects with Last-Event-ID
// (before its first event, the id of the stream's anchor, so from where its first
// stream joined the room, the first seq it must see). At
// the end it prints throughput, publish-to-deliver latency quantiles and the loss
// counters, and exits non-zero when any gap or duplicate was not explained by a resync
// frame, so a soak test in CI fails on a lost message.
//
// Named scenarios (-scenario) set defaults that flags still override: fanout (1,000
// subscribers on one room), many-rooms (10,000 rooms of two members, publishes spread
// over them), storm (every stream ends at once, from the server through POST
// /admin/shed or from the clients, and all resume; the report times the reconnects),
// rolling-drain (several -url pods; the ones with an -admin-url are drained one at a
// time through POST /admin/drain, or -drain-cmd runs per pod, while the load goes on),
// rebalance (several -url pods running with --rebalance; the last joins empty, a
// stream that ends reconnects to the least loaded pod, and the report follows each
// pod's streams until max/mean <= 1.2, bounded by -rebalance-wait), soak (a long
// steady run with a report line every -report-every) and chaos (its own fleet of a
// 3+3 Redis Cluster and three pods, faults injected one at a time on a schedule
// drawn from -seed; chaos*.go). Without -scenario the flags alone apply, as before.
// Every run keeps a timeline, one point per second of the measured window, in the
// JSON report; -plot DIR draws it as PNGs.
//
// With -ws-share F that fraction of every room's subscribers hold a WebSocket
// connection (GET /ws, one room each) instead of an SSE stream: a hello with a
// client id of their own (anon:loadgen-<run>-<i>) and the boot this process made at
// start, acks of the events they processed, and after a drain, a shed, a slow
// consumer close or a break a reconnect that resumes from the last id (or, before
// the first event, from where the welcome said the connection joined); a 44xx close
// stops the subscriber as a 4xx answer stops an SSE one. Their events go through
// the same check and Tracker as SSE events, and the report adds one line (JSON
// "transports") per transport. -idle holds them too, so -idle -pid measures the
// server's memory per WebSocket; -protocol centrifugo does not take -ws-share.
//
// With -idle it only opens the streams and holds them; with -pid it reads the server's
// resident memory before and after, to measure memory per connection, and with
// -metrics-url the server's go_goroutines (a Prometheus exposition: roomcast's admin
// /metrics) before connecting and at the plateau (goroutines.go). With -serve-hub
// it serves the yardstick hub (package internal/hub) instead, so the gateway and a
// minimal net/http hub can be measured the same way. With -protocol centrifugo it
// speaks Centrifugo's wire instead (uni_sse streams with HS256 connection tokens, the
// HTTP publish API, channel offsets as seqs; see centrifugo.go), so .ci/bench-peers can
// run the same workloads against both.
//
// Examples:
//
//	go run ./cmd/loadgen -url http://127.0.0.1:8080 -subs 1000 -rooms 10 -rate 500 -duration 30s
//	go run ./cmd/loadgen -subs 1000 -rate 100 -batch 20 -token "$TOKEN" -json
//	go run ./cmd/loadgen -idle -subs 5000 -pid "$(pgrep -n gateway)" -metrics-url http://127.0.0.1:9090/metrics -duration 10s
//	go run ./cmd/loadgen -subs 2000 -ws-share 0.5 -rooms 1 -rate 300 -json
//	go run ./cmd/loadgen -serve-hub 127.0.0.1:8081
//	go run ./cmd/loadgen -scenario fanout -plot /tmp/plots -json
//	go run ./cmd/loadgen -scenario storm -admin-url http://127.0.0.1:9090
//	go run ./cmd/loadgen -scenario rolling-drain -url http://a:8080 -url http://b:8080 -admin-url http://a:9090
//	go run ./cmd/loadgen -scenario rebalance -url http://a:8080 -url http://b:8080 -admin-url http://a:9090 -admin-url http://b:9090
//
// Exit codes: 0 clean; 1 a gap, duplicate, out-of-order event, unannounced epoch change
// or malformed frame was seen, an acknowledged event had not arrived when the run
// ended, or the rebalance scenario's pods were not balanced within -rebalance-wait; 2 bad flags, a run that could not start or measured nothing (no subscriber
// ever connected, every publish failed), a storm or drain that did not happen as
// asked (no stream ended, not every stream back, a drain refused), or a plot that
// could not be written (the report is printed first). .ci/bench
// runs it against roomcast (with --idle-loop on and off) and the hub, .ci/bench-peers
// against those and Centrifugo, and both print them side by side.
//
// The stream decoder and the gap and duplicate accounting are gateway/gatewaytest's
// Decoder and Tracker, and the WebSocket client is gateway/gatewaytest/wsclient: the
// ones the tests use. Files by role: config.go (flags),
// scenario.go (the named scenarios' defaults and checks), hist.go (latency
// histogram), subscriber.go and publisher.go (the two sides of the load), ws.go (the
// WebSocket transport of a subscriber), mux.go (multiplexed SSE members, -mux-streams),
// chaos.go, chaos_fleet.go, chaos_schedule.go and chaos_faults.go (the chaos
// scenario: its run, its fleet, its seeded schedule, its fault kinds), report_transport.go (the figures per
// transport), pods.go
// (several -url pods, and which streams are open where), run.go (phases: connect,
// warm up, measure, settle), timeline.go (the per-second timeline), storm.go and
// rollingdrain.go (the actions of those scenarios), progress.go (the progress line
// or bar, and the periodic report line), plot.go (the PNG plots), centrifugo.go
// (Centrifugo's wire), report.go (final table and JSON), rss.go (/proc memory
// reading), term_*.go (is stderr a terminal) and main.go (exit codes, hub mode).
//
// Concurrency: one goroutine per subscriber (a WebSocket subscriber's reads and
// acks included; the library answers the server's pings inside its reads), a fixed pool of publishers, one
// progress ticker, and in the measured window the timeline sampler (on run's
// goroutine) and one goroutine for the scenario's action (storm, drains, chaos faults). Every
// subscriber owns its tracker and histogram; shared counters are atomics read by the
// progress line and the sampler, a subscriber's connection fields (open, pod, how to
// end it, the storm's accounting) are guarded by loadState.connMu, and the final
// report reads a subscriber's state only after its goroutine has returned.
package main
