package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// resumingClient wraps r3labs/sse so that it behaves as roomcast clients must: it
// reconnects on a clean end of stream as well as on errors (the library returns nil on
// EOF), never gives up, and resumes with the last id it saw (the library keeps it
// in the Client and sends it as Last-Event-ID). One Client per subscription: it is not
// safe to share.
func resumingClient(ctx context.Context, url string, handler func(*sse.Event)) (reconnects int, err error) {
	c := sse.NewClient(url, sse.ClientMaxBufferSize(1<<20))
	c.ReconnectStrategy = &backoff.StopBackOff{} // one attempt per call: the loop below retries
	pause := 10 * time.Millisecond
	for {
		err := c.SubscribeRawWithContext(ctx, handler)
		if ctx.Err() != nil {
			return reconnects, nil
		}
		if err == nil {
			pause = 10 * time.Millisecond // a clean end: the server moved us; come back soon
		} else {
			pause = min(pause*2, time.Second)
		}
		reconnects++
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return reconnects, nil
		}
	}
}

// TestR3labsClientResumesAcrossServerCloses drives an independent SSE client through
// repeated server-side closes while events are published, and checks it saw every
// event exactly once.
func TestR3labsClientResumesAcrossServerCloses(t *testing.T) {
	p := newPod(t, podConfig{history: 10000, gw: gateway.Config{RetryMin: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond}})
	const total = 1500
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var seqs []uint64
	done := make(chan struct{})
	handler := func(ev *sse.Event) {
		if len(ev.Data) == 0 || string(ev.Event) == gatewaytest.AnchorType {
			return // a retry hint, a comment block or the anchor (whose id the client keeps)
		}
		seq := seqOf(string(ev.ID))
		if seq == 0 {
			t.Errorf("bad id %q", ev.ID)
		}
		mu.Lock()
		seqs = append(seqs, seq)
		if seq == total {
			close(done)
		}
		mu.Unlock()
	}
	var reconnects int
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		reconnects, _ = resumingClient(ctx, p.public.URL+"/rooms/r3/events", handler)
	}()
	replaytest.Eventually(t, 10*time.Second, "client connected", func() bool { return p.rooms.Len() == 1 })

	for i := 1; i <= total; i++ {
		p.publish(t, "r3", `{"i":`+strconv.Itoa(i)+`}`)
		if i%250 == 0 { // the server ends the stream, as a drain or shed does
			replaytest.Eventually(t, 10*time.Second, "client connected", func() bool { return p.rooms.Len() == 1 })
			if res := do(t, http.MethodPost, p.admin.URL+"/admin/shed?count=1", ""); res.status != 200 {
				t.Fatalf("shed: %d", res.status)
			}
		}
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the client never received the last event")
	}
	cancel()
	<-clientDone

	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != total {
		t.Fatalf("received %d events, want %d", len(seqs), total)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("event %d has seq %d: lost or duplicated", i, s)
		}
	}
	if reconnects < total/250-1 {
		t.Fatalf("only %d reconnects: the server closes did not happen", reconnects)
	}
}
