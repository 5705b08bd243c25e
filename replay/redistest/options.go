package redistest

import (
	"errors"
	"strings"
	"testing"
)

// Options configure a standalone server beyond what Standalone starts, for tests of
// TLS and ACLs. The zero Options is Standalone's server.
type Options struct {
	// TLS, when set, makes the server speak TLS only: its port serves TLS with
	// TLS.CertFile and TLS.KeyFile, there is no plain port, and clients are not asked
	// for a certificate. Do and MustDo then connect over TLS, trusting TLS.CAFile.
	TLS *PKI
	// ACLFile, when set, is the server's aclfile. With its default user off the
	// server is up once it refuses PING with NOAUTH, and Do gets that refusal too.
	ACLFile string
	// Args are further redis-server arguments, after all others.
	Args []string
}

// StandaloneWith starts a standalone server configured by opts for t alone, stopped
// when t ends. With opts.TLS set it skips t (fails it under CI=true), with the
// server's words, when this redis-server exits at start with output that mentions
// TLS: a build without TLS.
func StandaloneWith(t testing.TB, opts Options) *Server {
	t.Helper()
	Require(t)
	n, err := startNode(t.TempDir(), false, 0, opts)
	if err != nil {
		if opts.TLS != nil && errors.Is(err, errExited) && strings.Contains(strings.ToLower(err.Error()), "tls") {
			unavailable(t, "redistest: this redis-server does not serve TLS: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(n.kill)
	return &Server{Node: n}
}
