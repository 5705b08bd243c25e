package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestReceiptMeasure measures receipts on the Redis Cluster, two pods: the client
// on pod B, publishers on pod A. It prints (1) the Redis calls pod B makes for n
// acks that come as fast as the events (its ownership calls: the acks' writes; and
// all its calls), and (2) the latency of n publishes with Wait-For: ack on A, one at
// a time, the owner acknowledging each event as it comes, beside the same publish
// without Wait-For. Full size with ROOMCAST_MEASURE=1 (n = 1000).
func TestReceiptMeasure(t *testing.T) {
	n := measureN(t, 1000)
	a, b := twoPods(t, "measure")
	client := redistest.Prefix(t) + "-rig"
	inbox := "inbox." + client
	owner := dialWS(t, b)
	owner.welcome(client, boot1, map[string]string{inbox: ""})

	// (1) Redis calls for n acks: as fast as the events come, then paced over
	// about 3 s (one ack every 3s/n).
	for _, pace := range []time.Duration{0, 3 * time.Second / time.Duration(n)} {
		var owners, all atomic.Int64
		b.log.(*replay.RedisLog).ObserveCalls(func(op replay.RedisOp, _ time.Duration, _ error) {
			all.Add(1)
			if op == replay.OpOwner {
				owners.Add(1)
			}
		})
		items := make([]string, n)
		for i := range items {
			items[i] = `{"room":"` + inbox + `","body":1}`
		}
		for len(items) > 0 {
			k := min(len(items), 1000)
			if res := do(t, http.MethodPost, a.public.URL+"/events", "["+strings.Join(items[:k], ",")+"]", "Content-Type", "application/json"); res.status != http.StatusOK {
				t.Fatalf("batch: %d %s", res.status, res.body)
			}
			items = items[k:]
		}
		start := time.Now()
		var last string
		for range n {
			last = ownerAcks(t, owner, inbox)
			time.Sleep(pace) // the measured load, not a synchronisation
		}
		acking := time.Since(start)
		reader := control(t, a.log).Receipts
		replaytest.Eventually(t, 10*time.Second, "the last ack recorded", func() bool {
			_, ack, ok, err := reader.ClientAck(context.Background(), client, inbox)
			return err == nil && ok && ack.ID.String() == last
		})
		t.Logf("%d acks in %v: pod B made %d ownership calls (ack writes) and %d Redis calls in all until the last ack was recorded",
			n, acking.Round(time.Millisecond), owners.Load(), all.Load())
		b.log.(*replay.RedisLog).ObserveCalls(nil)
	}

	// (2) Publish latency with and without Wait-For.
	took := make(chan time.Duration, n)
	go func() {
		for range n {
			r := <-publishWaiting(a.public.URL, inbox, `{"n":1}`, "ack; timeout=10s")
			if r.err != nil || r.status != http.StatusCreated {
				took <- -1
				continue
			}
			took <- r.took
		}
	}()
	waited := make([]time.Duration, 0, n)
	for range n {
		ownerAcks(t, owner, inbox)
	}
	for range n {
		d := <-took
		if d < 0 {
			t.Fatal("a publish with Wait-For was not acknowledged")
		}
		waited = append(waited, d)
	}
	plain := make([]time.Duration, 0, n)
	for range n {
		s := time.Now()
		a.publish(t, "measure-plain", `{"n":1}`)
		plain = append(plain, time.Since(s))
	}
	t.Logf("publish on pod A, client on pod B, %d each: Wait-For: ack p50 %v p99 %v; without p50 %v p99 %v",
		n, pct(waited, 50), pct(waited, 99), pct(plain, 50), pct(plain, 99))
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}
