// Package polltest holds the repository's one poll loop: Eventually for tests,
// which fails the test when a condition does not come to hold in time, and Until,
// which returns the condition's last error instead, for helpers that report through
// an error of their own (replay/redistest starting a cluster).
//
// It is for states that no event announces, such as a counter settling after a
// connection closed or a Redis node agreeing on the cluster's shape; wherever a
// channel or a frame announces the state, wait on that instead.
//
// # Must not
//
// Import anything but the standard library: it sits below replay/redistest, which
// replay/replaytest imports, so that every test helper of the repository polls
// through it (replaytest.Eventually forwards here).
//
// # Concurrency
//
// Eventually and Until call the condition from the calling goroutine only.
package polltest
