package gateway_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
)

// slowJoinLog holds every Subscribe (a room's first join) until release is
// closed, after telling entered: a first join that takes seconds, as on Redis.
type slowJoinLog struct {
	*replay.MemoryLog
	entered chan string
	release chan struct{}
}

// Unwrap is the log it wraps, whose control plane it has (replay.ControlOf).
func (l *slowJoinLog) Unwrap() replay.Log { return l.MemoryLog }

func (l *slowJoinLog) Subscribe(ctx context.Context, room string, ring func(replay.Event)) error {
	l.entered <- room
	select {
	case <-l.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.MemoryLog.Subscribe(ctx, room, ring)
}

// A revocation that lands while a connection is joining its rooms still ends it:
// the credential is checked again once the connection is indexed for revocations.
// Before, it stayed live until its token expired.
func TestRevocationDuringAJoinEndsTheConnection(t *testing.T) {
	for _, transport := range []string{"stream", "multiplexed", "websocket"} {
		t.Run(transport, func(t *testing.T) {
			mem, err := replay.NewMemoryLog(replay.MemoryConfig{})
			if err != nil {
				t.Fatal(err)
			}
			l := &slowJoinLog{MemoryLog: mem, entered: make(chan string, 8), release: make(chan struct{})}
			var once sync.Once
			open := func() { once.Do(func() { close(l.release) }) }
			t.Cleanup(open)
			p := newSecurePod(t, l, gatewaytest.NewKeys(t), gateway.Config{})
			tok := p.token(t, "EdDSA", "ana", time.Hour, []string{"team-7.*"}, nil)
			const room = "team-7.a"
			// The stream's request returns once it has joined: open it aside.
			opened := make(chan *stream, 1)
			var c *wsClient
			switch transport {
			case "stream":
				go func() { opened <- p.subscribe(t, room, "", "Authorization", "Bearer "+tok) }()
			case "multiplexed":
				go func() { opened <- p.subscribeMany(t, []string{room, "team-7.b"}, "", "Authorization", "Bearer "+tok) }()
			case "websocket":
				c = dialWS(t, p.pod, "Authorization", "Bearer "+tok)
				c.send(map[string]any{"v": 1, "kind": "hello", "client": "joiner", "boot": boot1, "rooms": map[string]string{room: ""}})
			}
			select {
			case <-l.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the connection never joined")
			}
			revoke(t, p.pod, `{"sub":"ana"}`)
			open()
			if c != nil {
				c.wantClose(4401)
			} else {
				var s *stream
				select {
				case s = <-opened:
				case <-time.After(10 * time.Second):
					t.Fatal("the stream never opened")
				}
				reauth := false
				for _, f := range s.waitEnd() {
					reauth = reauth || f.event == "reauth"
				}
				if !reauth {
					t.Fatal("the stream ended without a reauth")
				}
			}
			if res := do(t, http.MethodGet, p.public.URL+"/rooms/"+room+"/events", "", "Authorization", "Bearer "+tok); res.status != http.StatusUnauthorized {
				t.Fatalf("a new stream with the revoked token: %d", res.status)
			}
		})
	}
}
