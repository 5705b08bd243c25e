package redistest_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/redistest"
)

// TestNewPKI: the server certificate verifies against the pool for 127.0.0.1 and
// localhost, and every file is PEM.
func TestNewPKI(t *testing.T) {
	p := redistest.NewPKI(t)
	pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: p.Pool, DNSName: name}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s holds no PEM certificate", p.CAFile)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), DNSName: "localhost"}); err == nil {
		t.Fatal("the server certificate verifies without its CA")
	}
}

// send writes one inline command on c and returns the first line of the reply.
func send(t *testing.T, c net.Conn, cmd string) string {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// TestStandaloneWithTLS: a server with Options.TLS answers over TLS with the PKI's CA
// only, Do reaches it too, and Options.Args reach the server.
func TestStandaloneWithTLS(t *testing.T) {
	p := redistest.NewPKI(t)
	s := redistest.StandaloneWith(t, redistest.Options{TLS: p, Args: []string{"--maxmemory", "12mb"}})
	c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := send(t, c, "PING"); got != "+PONG" {
		t.Fatalf("PING over TLS: %q", got)
	}
	if _, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("a client without the CA verified the server")
	}
	if got := s.MustDo(t, "SET", "k", "v"); got != "OK" {
		t.Fatalf("Do over TLS: %q", got)
	}
	if got := s.MustDo(t, "CONFIG", "GET", "maxmemory"); !strings.Contains(got, "12582912") {
		t.Fatalf("maxmemory from Args: %q", got)
	}
}

// TestStandaloneWithACL: a server with Options.ACLFile loads it: with the default
// user off it is up but refuses an unauthenticated PING, and the file's user gets in.
func TestStandaloneWithACL(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(acl, []byte("user default off\nuser u on >u-password ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := redistest.StandaloneWith(t, redistest.Options{ACLFile: acl})
	if out, err := s.Do("PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING as the default user: %q, %v; want NOAUTH", out, err)
	}
	c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := send(t, c, "AUTH u u-password"); got != "+OK" {
		t.Fatalf("AUTH as the file's user: %q", got)
	}
}

// TestStandaloneWithTLSOnABuildWithoutTLS: when redis-server refuses the TLS
// configuration at start, as a build without TLS does, the test is skipped with the
// server's words, or failed under CI=true. (A stand-in redis-server answers as such
// a build; a recorder stands in for the test it would skip or fail.)
func TestStandaloneWithTLSOnABuildWithoutTLS(t *testing.T) {
	redistest.Require(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\n" +
		"echo \"*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\" >&2\n" +
		"echo \">>> 'tls-port \\\"6380\\\"'\" >&2\n" +
		"echo 'Bad directive or wrong number of arguments' >&2\n" +
		"exit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "redis-server"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cli, filepath.Join(bin, "redis-cli")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	pki := redistest.NewPKI(t)
	for _, tc := range []struct{ ci, want string }{{"", "skip"}, {"true", "fail"}} {
		t.Setenv("CI", tc.ci)
		r := &stopRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			redistest.StandaloneWith(r, redistest.Options{TLS: pki})
		}()
		<-done
		if r.how != tc.want || !strings.Contains(r.msg, "does not serve TLS") || !strings.Contains(r.msg, "tls-port") {
			t.Fatalf("CI=%q: %s %q; want a %s with the server's words", tc.ci, r.how, r.msg, tc.want)
		}
	}
}

// stopRecorder is a testing.TB whose Skipf and Fatalf record what they were told
// and end the calling goroutine, as the real ones do, without ending the test.
type stopRecorder struct {
	testing.TB
	how, msg string
}

func (r *stopRecorder) Skipf(format string, args ...any) {
	r.how, r.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *stopRecorder) Fatalf(format string, args ...any) {
	r.how, r.msg = "fail", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
