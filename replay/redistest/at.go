package redistest

import (
	"testing"
)

// FreePort returns a loopback port nothing listens on now: an address for a server
// that is not there yet (StandaloneAt starts one on it later).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// StandaloneAt starts a standalone server for t alone on port, stopped when t ends
// (or earlier by SHUTDOWN): for tests of clients that were started before their
// server, or that see it come back on the same address.
func StandaloneAt(t testing.TB, port int) *Server {
	t.Helper()
	return StandaloneAtWith(t, port, Options{})
}

// StandaloneAtWith is StandaloneAt configured by opts, as StandaloneWith.
func StandaloneAtWith(t testing.TB, port int, opts Options) *Server {
	t.Helper()
	Require(t)
	n, err := tryStartNode(t.TempDir(), port, false, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.kill)
	return &Server{Node: n}
}
