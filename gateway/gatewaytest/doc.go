// Package gatewaytest holds what the repository's tests and the load generator share
// to talk to a gateway from outside, in the manner of net/http/httptest: the one SSE
// decoder (Decoder, with Next for what EventSource dispatches and NextFrame for the
// blocks on the wire), the one loss tracker (Tracker), the one traffic and loss
// harness built on it (Ledger, whose publishers retry with an Idempotency-Key until
// acknowledged, and Audit, one subscriber's record checked against the Ledger), the
// one process launcher (Launch, Start, Build), the Prometheus scraper (Scrape, built
// on prometheus/common/expfmt), NewRequest, whose headers come as pairs and may set
// the Host, and the check of a README flag table against a flag.FlagSet (FlagTable,
// CheckFlagTable). The one poll loop lives lower, in replay/polltest (and
// replaytest.Eventually), so that rooms and replay tests may use it too.
//
// # Must not
//
// Import gateway, rooms or cmd: it speaks to a gateway only over HTTP and through
// its process, so both cmd/loadgen and the tests of every package above replay may
// import it.
//
// # Concurrency
//
// A Decoder and a Tracker belong to one goroutine; a Ledger and an Audit are safe for
// concurrent use. A Process is safe for concurrent use; its log is read by one
// goroutine that the process's end stops.
package gatewaytest
