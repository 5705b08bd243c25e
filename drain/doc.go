// Package drain owns a pod's lifecycle: ready → draining → stopped.
//
// Start (SIGTERM or POST /admin/drain) turns readiness off at once. For Delay the pod
// keeps serving and accepting, while the load balancer notices; then it stops
// accepting new streams and closes the open ones in jittered batches spread evenly
// over Window, so reconnects reach the other pods at a steady rate rather than in one
// burst. Whatever is still open at Timeout (counted from Start) is closed by force.
// Force skips straight to that final close.
//
// The Target's unit is a connection (the gateway's Connections: a stream, a
// multiplexed stream, a WebSocket connection), never a room membership: a connection
// of 32 rooms is one close in the pacing and in Closed, as a stream of one room is.
//
// # Must not
//
// Know about rooms, HTTP or Redis: it drives a Target.
//
// # Concurrency
//
// Every method is safe for concurrent use. Start runs the drain on one goroutine,
// which Done reports the end of.
package drain
