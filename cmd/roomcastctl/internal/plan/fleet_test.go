package plan_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/roomcast/roomcast/cmd/roomcastctl/internal/plan"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	redistest.Teardown()
	os.Exit(code)
}

// The workload of TestPlanMatchesFleet.
const (
	fleetPods      = 3
	fleetRooms     = 200
	fleetPerRoom   = 4   // publishes per room in each measured window
	fleetPayload   = 200 // body bytes
	fleetTolerance = 0.10
)

// fleetStream is one member: a stream on one pod, counting the bytes it reads.
type fleetStream struct {
	room string
	pod  int
	read atomic.Int64 // bytes of the response body read so far
	// Bytes read when the stream decoded the warm-up event and the window's last.
	atWarm, atLast int64
	err            error
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// primaryCounters is what one primary reports in INFO: bytes sent to clients
// (replies and pushes; replication is counted apart) and SPUBLISH calls (one per
// publish, made by the publish function).
type primaryCounters struct{ out, spublish int64 }

func counters(t *testing.T, n *redistest.Node) primaryCounters {
	t.Helper()
	st, err := n.Info("stats")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := n.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	var c primaryCounters
	c.out, _ = strconv.ParseInt(st["total_net_output_bytes"], 10, 64)
	if v, ok := cs["cmdstat_spublish"]; ok {
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		c.spublish, _ = strconv.ParseInt(calls, 10, 64)
	}
	return c
}

func snapshot(t *testing.T, ps []*redistest.Node) []primaryCounters {
	out := make([]primaryCounters, len(ps))
	for i, p := range ps {
		out[i] = counters(t, p)
	}
	return out
}

func within(got, want float64) bool {
	return math.Abs(got-want) <= fleetTolerance*want
}

// waitGroup waits for wg, failing t after d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not within %s", what, d)
	}
}

// TestPlanMatchesFleet checks the model against a real fleet: 3 gateway pods on a
// 3-primary Redis Cluster, 200 rooms of 3 to 5 members whose streams arrive in a
// random order and are routed round-robin over the pods, and 4 publishes per room.
// The SSUBSCRIBEs the primaries hold (PUBSUB SHARDNUMSUB) and the doorbell pushes
// they send (their output bytes, less what the same publishes cost without
// subscribers, over the size of one push) must be within 10% of the plan for the
// same inputs; the client deliveries and bytes the pods write are compared too.
func TestPlanMatchesFleet(t *testing.T) {
	c := redistest.SharedCluster(t)
	primaries := c.Primaries(t)
	bin, err := gatewaytest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seeds := strings.Join(c.Addrs(), ",")
	var pods []*gatewaytest.Process
	for i := range fleetPods {
		pods = append(pods, gatewaytest.Start(t, gatewaytest.Options{
			Name: fmt.Sprintf("pod%d", i),
			Bin:  bin,
			// Occupancy records are written every --occupancy-interval: at the longest
			// one, none falls into the measured windows, whose output bytes must be
			// the doorbells alone.
			Args: []string{"--redis", seeds, "--pod-id", fmt.Sprintf("plan-pod-%d", i),
				"--heartbeat", "10m", "--drain-delay", "0s", "--drain-window", "1s", "--occupancy-interval", "1m"},
		}))
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs()[:1], DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	// Rooms of equal name length, 3 to 5 members each.
	prefix := redistest.Prefix(t)
	rooms := make([]string, fleetRooms)
	members := 0
	for i := range rooms {
		rooms[i] = fmt.Sprintf("%s.%03d", prefix, i)
		members += 3 + i%3
	}
	in := plan.Inputs{
		Pods: fleetPods, Rooms: fleetRooms, MembersMin: 3, MembersMax: 5,
		PublishRate: fleetRooms * fleetPerRoom, // events per window, as a rate per window
		Payload:     fleetPayload, Routing: plan.RoundRobin, Redis: plan.Cluster, Shards: len(primaries),
		RoomNameLen: len(rooms[0]),
	}
	p, err := plan.Compute(in, plan.Limits{})
	if err != nil {
		t.Fatal(err)
	}

	// Streams arrive in a random order; the load balancer deals them out in turn.
	var streams []*fleetStream
	for i, r := range rooms {
		for range 3 + i%3 {
			streams = append(streams, &fleetStream{room: r})
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	rng.Shuffle(len(streams), func(i, j int) { streams[i], streams[j] = streams[j], streams[i] })
	held := map[[2]string]bool{} // (room, pod) pairs: the SSUBSCRIBEs the fleet must hold
	for k, s := range streams {
		s.pod = k % fleetPods
		held[[2]string{s.room, strconv.Itoa(s.pod)}] = true
	}

	body := []byte(`"` + strings.Repeat("x", fleetPayload-2) + `"`)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	publish := func(seqInRoom int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(rooms))
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					url := pods[i%fleetPods].Public + "/rooms/" + rooms[i] + "/events"
					res, err := hc.Post(url, "application/json", bytes.NewReader(body))
					if err != nil {
						errs <- err
						continue
					}
					b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
					res.Body.Close()
					if res.StatusCode != http.StatusCreated {
						errs <- fmt.Errorf("publish to %s: %d %s", rooms[i], res.StatusCode, b)
					} else if !bytes.Contains(b, []byte(`"seq":`+strconv.Itoa(seqInRoom)+`,`)) {
						errs <- fmt.Errorf("publish to %s: %s, want seq %d", rooms[i], b, seqInRoom)
					}
				}
			})
		}
		for i := range rooms {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}

	// Window A: the publishes alone, with no member anywhere (seqs 1..4).
	a0 := snapshot(t, primaries)
	for s := 1; s <= fleetPerRoom; s++ {
		publish(s)
	}
	a1 := snapshot(t, primaries)

	// Members join.
	ctx, cancel := context.WithCancel(context.Background())
	var ended sync.WaitGroup
	stop := sync.OnceFunc(func() {
		cancel()
		ended.Wait()
	})
	defer stop()
	const warmSeq, lastSeq = fleetPerRoom + 1, 2*fleetPerRoom + 1
	var joined, warm, last sync.WaitGroup
	joined.Add(len(streams))
	warm.Add(len(streams))
	last.Add(len(streams))
	for _, s := range streams {
		ended.Go(func() {
			s.err = follow(ctx, hc, pods[s.pod].Public, s, &joined, &warm, &last, warmSeq, lastSeq)
		})
	}
	waitGroup(t, &joined, 60*time.Second, "every stream's first frame")
	roomPrimary := make([]int, len(rooms)) // index in primaries of the room's shard
	for i, r := range rooms {
		n := c.NodeForKey(t, "room:{"+r+"}")
		roomPrimary[i] = slices.Index(primaries, n)
	}
	subscribers := func() (int, []int) {
		cmds := make(rueidis.Commands, len(rooms))
		for i, r := range rooms {
			cmds[i] = rc.B().PubsubShardnumsub().Channel("room:{" + r + "}").Build()
		}
		perPrimary := make([]int, len(primaries))
		total := 0
		for i, res := range rc.DoMulti(context.Background(), cmds...) {
			arr, err := res.ToArray()
			if err != nil || len(arr) != 2 {
				t.Fatalf("PUBSUB SHARDNUMSUB %s: %v", rooms[i], err)
			}
			n, err := arr[1].AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			total += int(n)
			perPrimary[roomPrimary[i]] += int(n)
		}
		return total, perPrimary
	}
	var ssubs int
	var ssubsPerPrimary []int
	replaytest.Eventually(t, 60*time.Second, "one SSUBSCRIBE per room per pod holding it", func() bool {
		ssubs, ssubsPerPrimary = subscribers()
		return ssubs == len(held)
	})
	busSubs := make([]float64, fleetPods)
	for i, pod := range pods {
		m, err := gatewaytest.Scrape(context.Background(), hc, pod.Admin+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		busSubs[i] = m.Value("roomcast_bus_subscriptions")
	}

	// One event per room that every member sees before the window opens.
	publish(warmSeq)
	waitGroup(t, &warm, 60*time.Second, "the warm-up event at every stream")
	delivered0 := podCounters(t, hc, pods)

	// Window B: the same publishes, now with members (seqs 6..9).
	b0 := snapshot(t, primaries)
	for s := warmSeq + 1; s <= lastSeq; s++ {
		publish(s)
	}
	waitGroup(t, &last, 60*time.Second, "the window's last event at every stream")
	b1 := snapshot(t, primaries)
	delivered1 := podCounters(t, hc, pods)
	stop()
	for _, s := range streams {
		if s.err != nil {
			t.Fatalf("stream of %s on pod %d: %v", s.room, s.pod, s.err)
		}
	}

	// Redis deliveries: each primary's output bytes in window B beyond what the same
	// publishes cost in window A, over the size of one push at these seqs.
	push := plan.DoorbellBytes(fleetPayload, len(rooms[0]), lastSeq)
	var pushes, exact float64
	perPrimary := make([]float64, len(primaries))
	for i := range primaries {
		pubsA, pubsB := a1[i].spublish-a0[i].spublish, b1[i].spublish-b0[i].spublish
		if pubsA != pubsB {
			t.Fatalf("primary %s: %d publishes in window A, %d in B", primaries[i].Addr, pubsA, pubsB)
		}
		extra := float64((b1[i].out - b0[i].out) - (a1[i].out - a0[i].out))
		perPrimary[i] = extra / float64(push)
		pushes += perPrimary[i]
		exact += float64(ssubsPerPrimary[i] * fleetPerRoom)
	}

	// Client deliveries and bytes per pod, as the pods count them and as their
	// streams read them.
	var clientBytes [fleetPods]int64
	var clientDeliveries [fleetPods]float64
	for _, s := range streams {
		clientBytes[s.pod] += s.atLast - s.atWarm
	}
	for i := range pods {
		clientDeliveries[i] = delivered1[i] - delivered0[i]
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n%d pods, %d rooms x 3-5 members (%d streams, round-robin in a random order), %d publishes of %d bytes, %d primaries\n",
		fleetPods, fleetRooms, members, fleetRooms*fleetPerRoom, fleetPayload, len(primaries))
	fmt.Fprintf(&b, "%-38s %12s %12s %8s\n", "", "plan", "measured", "error")
	line := func(name string, planned, measured float64) {
		prec := 1
		if planned < 100 {
			prec = 3
		}
		fmt.Fprintf(&b, "%-38s %12.*f %12.*f %+7.1f%%\n", name, prec, planned, prec, measured, 100*(measured-planned)/planned)
	}
	line("E_pods", p.EPods, float64(ssubs)/fleetRooms)
	line("SSUBSCRIBEs (PUBSUB SHARDNUMSUB)", p.SSubscribes, float64(ssubs))
	for i := range pods {
		line(fmt.Sprintf("  pod %d (roomcast_bus_subscriptions)", i), p.SSubscribesPerPod, busSubs[i])
	}
	line("Redis deliveries (output bytes / push)", p.RedisDeliveriesPerSec, pushes)
	line("  (publishes x SHARDNUMSUB)", p.RedisDeliveriesPerSec, exact)
	for i, pn := range primaries {
		line("  primary "+pn.Addr, p.RedisDeliveriesPerSecPerShard, perPrimary[i])
	}
	line("Redis egress bytes", p.RedisEgressPerSec, pushes*float64(push))
	for i := range pods {
		line(fmt.Sprintf("client deliveries, pod %d", i), p.ClientDeliveriesPerSecPerPod, clientDeliveries[i])
	}
	for i := range pods {
		line(fmt.Sprintf("client bytes read, pod %d", i), p.ClientEgressPerSecPerPod, float64(clientBytes[i]))
	}
	fmt.Fprintf(&b, "push %d B at a 1-digit seq (plan: %d B at 6 digits), frame %d B (plan: %d B at 6 digits)\n",
		push, p.DoorbellBytes, plan.FrameBytes(fleetPayload, len(rooms[0]), lastSeq), p.FrameBytes)
	t.Log(b.String())

	if !within(float64(ssubs), p.SSubscribes) {
		t.Errorf("SSUBSCRIBEs: measured %d, plan %.1f", ssubs, p.SSubscribes)
	}
	if !within(pushes, p.RedisDeliveriesPerSec) {
		t.Errorf("Redis deliveries: measured %.1f, plan %.1f", pushes, p.RedisDeliveriesPerSec)
	}
	// The byte count and the subscriber count must tell the same story: the push
	// size the plan uses is the size Redis sends.
	if math.Abs(pushes-exact) > 0.02*exact {
		t.Errorf("pushes from output bytes %.1f, from publishes x SHARDNUMSUB %.0f", pushes, exact)
	}
	for i := range pods {
		if !within(clientDeliveries[i], p.ClientDeliveriesPerSecPerPod) {
			t.Errorf("pod %d wrote %.0f events, plan %.1f", i, clientDeliveries[i], p.ClientDeliveriesPerSecPerPod)
		}
		if !within(float64(clientBytes[i]), p.ClientEgressPerSecPerPod) {
			t.Errorf("pod %d's streams read %d bytes, plan %.1f", i, clientBytes[i], p.ClientEgressPerSecPerPod)
		}
	}
}

// podCounters returns each pod's roomcast_events_delivered_total.
func podCounters(t *testing.T, hc *http.Client, pods []*gatewaytest.Process) []float64 {
	t.Helper()
	out := make([]float64, len(pods))
	for i, pod := range pods {
		m, err := gatewaytest.Scrape(context.Background(), hc, pod.Admin+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		out[i] = m.Value("roomcast_events_delivered_total")
	}
	return out
}

// follow reads one stream: it marks joined at the first frame, warm when it decodes
// the event at warmSeq (the first it may see) and last at lastSeq, recording the
// bytes read at each, and then waits for ctx to end.
func follow(ctx context.Context, hc *http.Client, base string, s *fleetStream, joined, warm, last *sync.WaitGroup, warmSeq, lastSeq uint64) error {
	marks := []*sync.WaitGroup{joined, warm, last}
	defer func() {
		for _, m := range marks {
			m.Done()
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/rooms/"+s.room+"/events", nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	dec := gatewaytest.NewDecoder(bufio.NewReader(countingReader{res.Body, &s.read}), nil)
	want := warmSeq
	for {
		f, err := dec.NextFrame()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("after seq %d: %w", want-1, err)
		}
		if marks[0] == joined {
			joined.Done()
			marks = marks[1:]
		}
		if !f.HasData || f.IsAnchor() {
			continue
		}
		_, seqText, _ := strings.Cut(f.ID, ":")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		if f.Event != "" || err != nil || seq != want {
			return fmt.Errorf("frame %q %q %q, want seq %d", f.ID, f.Event, f.Data, want)
		}
		switch seq {
		case warmSeq:
			s.atWarm = s.read.Load()
			warm.Done()
			marks = marks[1:]
		case lastSeq:
			s.atLast = s.read.Load()
			last.Done()
			marks = marks[1:]
		}
		if seq == lastSeq {
			<-ctx.Done()
			return nil
		}
		want++
	}
}
