package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// sinceCountingLog counts the history reads a pod makes: every Since call, shared or
// not. It is the Redis log in every other respect (its control plane included).
type sinceCountingLog struct {
	*replay.RedisLog
	since atomic.Int64
}

// Unwrap is the log it wraps, whose control plane it has (replay.ControlOf).
func (l *sinceCountingLog) Unwrap() replay.Log { return l.RedisLog }

func (l *sinceCountingLog) Since(ctx context.Context, room string, after replay.Position, limit int) ([]replay.Event, replay.Position, error) {
	l.since.Add(1)
	return l.RedisLog.Since(ctx, room, after, limit)
}

// redisHistoryCalls reads node's INFO commandstats: the calls of the read-only function
// call a history read is, and of every command that reads a stream (the function's
// own XRANGE and XREVRANGE among them).
func redisHistoryCalls(t *testing.T, n *redistest.Node) (fcalls, all int) {
	t.Helper()
	info, err := n.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"fcall_ro", "xrange", "xrevrange"} {
		v, ok := info["cmdstat_"+cmd]
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		c, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("cmdstat_%s %q", cmd, v)
		}
		if cmd == "fcall_ro" {
			fcalls = c
		}
		all += c
	}
	return fcalls, all
}

// stormResumer is one resuming stream, read by the shared decoder and checked by a
// Tracker: every event after its resume point, in order, once, and nothing else.
type stormResumer struct {
	after   uint64
	res     *http.Response
	dec     *gatewaytest.Decoder
	tracker gatewaytest.Tracker
}

// readUpTo reads until the event at seq; anything but the next event in order fails.
func (c *stormResumer) readUpTo(epoch string, seq uint64) error {
	for c.tracker.Last() < seq {
		f, err := c.dec.NextFrame()
		if err != nil {
			return fmt.Errorf("after %d: stream ended at %d: %w", c.after, c.tracker.Last(), err)
		}
		if f.Event != "" {
			return fmt.Errorf("after %d: got event %q (%s), want only events", c.after, f.Event, f.Data)
		}
		if !f.HasData {
			continue // retry hint, heartbeat
		}
		e, s, _ := strings.Cut(f.ID, ":")
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || e != epoch {
			return fmt.Errorf("after %d: event id %q, want %s:<seq>", c.after, f.ID, epoch)
		}
		if v := c.tracker.Observe([]byte(e), n); v != gatewaytest.InOrder {
			return fmt.Errorf("after %d: seq %d is %s (last %d)", c.after, n, v, c.tracker.Last())
		}
	}
	return nil
}

// TestResumeStormCostsOneRead: 2,000 clients resume one room at once on a pod that
// has no member of it yet (a rolling restart moved them), from positions spread over
// the last 500 events. The pod reads the room's history at most 3 times for all of
// them, and every client gets exactly the events after its resume point, then live.
func TestResumeStormCostsOneRead(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	resumeStorm(t, srv, srv.Node, 2000)
}

// TestResumeStormCostsOneReadOnCluster is the storm on a cluster, smaller: the reads
// are counted on the primary that owns the room.
func TestResumeStormCostsOneReadOnCluster(t *testing.T) {
	c := redistest.SharedCluster(t)
	room := redistest.Prefix(t)
	resumeStormIn(t, c, c.NodeForKey(t, "room:{"+room+"}"), room, 500)
}

// resumeStorm runs the storm of clients on a fresh room of the Redis at addrs, and
// reads Redis's own counts of history reads on node.
func resumeStorm(t *testing.T, addrs addrser, node *redistest.Node, clients int) {
	t.Helper()
	resumeStormIn(t, addrs, node, redistest.Prefix(t), clients)
}

func resumeStormIn(t *testing.T, addrs addrser, node *redistest.Node, room string, clients int) {
	t.Helper()
	const (
		events = 600
		spread = 500
	)
	// Bounds for a loaded machine: 4,000 connections' goroutines under the race
	// detector can starve a Redis call past the default 2s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rl, err := replay.NewRedisLog(ctx, replay.RedisConfig{Addrs: addrs.Addrs(), History: 1000, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := &sinceCountingLog{RedisLog: rl}
	p := newPodOn(t, log, podConfig{})
	var last replay.Event
	for i := range events {
		if last, err = rl.Append(ctx, room, replay.Message{Body: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	epoch := last.Epoch

	tr := &http.Transport{DisableKeepAlives: true, MaxConnsPerHost: 0}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	readsBefore := log.since.Load()
	fcallsBefore, allBefore := redisHistoryCalls(t, node)

	cs := make([]*stormResumer, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range cs {
		c := &stormResumer{after: events - spread + uint64(i%spread)}
		c.tracker.ResyncIsHead()
		c.tracker.ExpectFirst(c.after + 1)
		cs[i] = c
		wg.Go(func() {
			<-start
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.public.URL+"/rooms/"+room+"/events", nil)
			req.Header.Set("Last-Event-ID", replay.Position{Epoch: epoch, Seq: c.after}.String())
			res, err := hc.Do(req)
			if err != nil {
				t.Errorf("client after %d: %v", c.after, err)
				return
			}
			c.res = res
			c.dec = gatewaytest.NewDecoder(bufio.NewReaderSize(res.Body, 64<<10), nil)
			if err := c.readUpTo(epoch, events); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	defer func() {
		for _, c := range cs {
			if c.res != nil {
				c.res.Body.Close()
			}
		}
	}()
	fcalls, all := redisHistoryCalls(t, node)
	reads, fcalls, all := log.since.Load()-readsBefore, fcalls-fcallsBefore, all-allBefore
	t.Logf("%d resumes: %d history reads by the pod, %d FCALL_RO on Redis (%d stream reads with their XRANGE/XREVRANGE)",
		clients, reads, fcalls, all)
	if reads > 3 || fcalls > 3 {
		t.Errorf("the storm cost %d history reads (%d FCALL_RO on Redis), want at most 3", reads, fcalls)
	}
	m := p.metrics(t)
	if got := m.Value("roomcast_resume_history_reads_total"); got != float64(reads) {
		t.Errorf("roomcast_resume_history_reads_total = %v, want the %d reads counted", got, reads)
	}
	if hits := m.Value("roomcast_resume_recent_hits_total"); hits < float64(clients) {
		t.Errorf("roomcast_resume_recent_hits_total = %v, want every one of %d resumes served from the latest events", hits, clients)
	}
	if m.Value("roomcast_recent_bytes") <= 0 {
		t.Error("roomcast_recent_bytes is 0 with a room's events kept")
	}
	if t.Failed() {
		return
	}

	// Every stream continues live from where its history ended.
	live, err := rl.Append(ctx, room, replay.Message{Body: json.RawMessage(`{"live":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		wg.Go(func() {
			if err := c.readUpTo(epoch, live.Seq); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if st := p.rooms.Stats(); st.Members != int64(clients) {
		t.Errorf("pod holds %d members, want %d", st.Members, clients)
	}
}
