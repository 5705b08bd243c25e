package replay_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestRedisTLS: over TLS with the server's CA a log appends, reads, subscribes and
// redeems a ticket; without the CA it never connects, and says why.
func TestRedisTLS(t *testing.T) {
	t.Parallel()
	p := redistest.NewPKI(t)
	addr := redistest.StandaloneWith(t, redistest.Options{TLS: p}).Addr
	ctx := context.Background()
	l := newRedisLog(t, []string{addr}, replay.RedisConfig{TLS: &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}})
	ctl := controlOf(t, l)
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
	if err := ctl.Tickets.PutTicket(ctx, "tls-ticket", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := ctl.Tickets.TakeTicket(ctx, "tls-ticket"); err != nil || string(v) != "v" {
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
