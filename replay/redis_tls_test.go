package replay_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// testPKI is a CA and a server certificate it signed for 127.0.0.1 and localhost,
// as PEM files in a directory.
type testPKI struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "roomcast test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server.key"), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	for file, block := range map[string]*pem.Block{
		p.caFile:   {Type: "CERTIFICATE", Bytes: caDER},
		p.certFile: {Type: "CERTIFICATE", Bytes: srvDER},
		p.keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// startTLSRedis starts a redis-server that speaks TLS only, with p's certificate; it
// skips t when this redis-server was built without TLS.
func startTLSRedis(t *testing.T, p testPKI) string {
	t.Helper()
	port, _, err := startRedisWith(t, "--port", "0", "--tls-port", "PORT",
		"--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-ca-cert-file", p.caFile,
		"--tls-auth-clients", "no")
	var se *startError
	if errors.As(err, &se) && (strings.Contains(se.log, "TLS") || strings.Contains(se.log, "tls")) {
		t.Skipf("this redis-server does not serve TLS: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// TestRedisTLS: over TLS with the server's CA a log appends, reads, subscribes and
// redeems a ticket; without the CA it never connects, and says why.
func TestRedisTLS(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	addr := startTLSRedis(t, p)
	ctx := context.Background()
	l := newRedisLog(t, []string{addr}, replay.RedisConfig{TLS: &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}})
	room := redistest.Prefix(t) + ".tls"
	rec := subscribeRec(t, l, room)
	ev := mustAppend(t, l, room, msgN(1))
	if got := rec.next(t, 10*time.Second); got.Seq != ev.Seq {
		t.Fatalf("ring %+v, want seq %d", got, ev.Seq)
	}
	evs, _, err := l.Since(ctx, room, replay.Position{}, 10)
	if err != nil || len(evs) != 1 || evs[0].Seq != ev.Seq {
		t.Fatalf("since: %+v, %v", evs, err)
	}
	if err := l.PutTicket(ctx, "tls-ticket", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := l.TakeTicket(ctx, "tls-ticket"); err != nil || string(v) != "v" {
		t.Fatalf("take: %q, %v", v, err)
	}
	if h := l.Health(); !h.Up {
		t.Fatalf("health over TLS: %+v", h)
	}

	var logs replaytest.SyncBuffer
	untrusting, err := replay.NewRedisLog(ctx, replay.RedisConfig{
		Addrs: []string{addr}, TLS: &tls.Config{MinVersion: tls.VersionTLS12}, Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatalf("a log that cannot verify the server still starts (and keeps trying): %v", err)
	}
	t.Cleanup(func() { _ = untrusting.Close(context.Background()) })
	if _, err := untrusting.Append(ctx, room, msgN(2)); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("append without the CA: %v, want ErrUnavailable", err)
	}
	if h := untrusting.Health(); h.Up {
		t.Fatalf("health without the CA: %+v", h)
	}
	if out := logs.String(); !strings.Contains(out, "certificate") {
		t.Fatalf("the start-up warning does not say why: %s", out)
	}

	plain := []string{addr}
	var plainLogs replaytest.SyncBuffer
	noTLS, err := replay.NewRedisLog(ctx, replay.RedisConfig{Addrs: plain, Timeout: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&plainLogs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = noTLS.Close(context.Background()) })
	if err := noTLS.Ping(ctx); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("plain connection to a TLS port: %v, want ErrUnavailable", err)
	}
}
