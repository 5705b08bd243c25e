package deploy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

// The fleet behind nginx: three real gateway pods on the local 3+3 Redis Cluster,
// a real nginx running nginx.conf's routing in front of them, subscribers over rooms
// and publishes through nginx. It runs twice: with the file's room hash (affinity),
// and with the same file where the hash line is least_conn (no affinity).

// fleetPods is how many gateway pods the fleet runs.
const fleetPods = 3

// fleetSize is one run's shape: rooms, subscribers per room, events per room, and
// the publishes per second through nginx (0: as fast as they are answered).
type fleetSize struct{ rooms, perRoom, events, rate int }

// fleetSizeCI keeps the normal run small and fast; fleetSizeMeasure is the size the
// figures in deploy/README.md are measured at (ROOMCAST_MEASURE=1), at one pace for
// every mode: Redis's CPU per event depends on how many commands one pass of its
// event loop handles, so the modes are compared at one rate, below what the
// slower one sustains on a 2-core machine.
var (
	fleetSizeCI      = fleetSize{rooms: 60, perRoom: 10, events: 10}
	fleetSizeMeasure = fleetSize{rooms: 300, perRoom: 10, events: 30, rate: 500}
)

// fleetPublishers is how many publishes are in flight at once through nginx.
const fleetPublishers = 16

// hashLineRE is nginx.conf's room hash in the upstream block.
var hashLineRE = regexp.MustCompile(`(?m)^(\s*)hash \$room_key consistent;`)

// withoutAffinity is nginx.conf with its room hash replaced by least_conn, as
// deploy/README.md tells operators to turn affinity off: one explicit substitution
// of the one hash line, everything else the same.
func withoutAffinity(data []byte) ([]byte, error) {
	if n := len(hashLineRE.FindAll(data, -1)); n != 1 {
		return nil, fmt.Errorf("nginx.conf has %d lines `hash $room_key consistent;`, want 1", n)
	}
	return hashLineRE.ReplaceAll(data, []byte("${1}least_conn;")), nil
}

// fleetResult is what one mode measured.
type fleetResult struct {
	mode      string
	shardSubs []int // SHARDNUMSUB of each room's channel, on the primary owning its slot
	published int
	took      time.Duration // from the first publish until every subscriber had every event
	redis     redisDelta
	idle      redisDelta // the same fleet right after, over a window without publishes (measure only)
	lost      uint64     // seqs some subscriber never got
	dups      uint64
	resyncs   uint64
	failures  []string // streams that ended or misbehaved, publishes refused
}

// redisDelta is what the primaries did over a window, from INFO (or, read once,
// their counters at a time).
type redisDelta struct {
	cpu      float64 // used_cpu_sys + used_cpu_user, seconds
	out      int64   // total_net_output_bytes: replies and pushes to clients
	replOut  int64   // total_net_repl_output_bytes: the replication stream to replicas
	commands int64   // total_commands_processed, commands run by functions included
	dur      time.Duration
	at       time.Time // of a reading
}

func (r fleetResult) shardMean() float64 {
	sum := 0
	for _, n := range r.shardSubs {
		sum += n
	}
	return float64(sum) / float64(len(r.shardSubs))
}

// TestNginxFleetAffinity measures room affinity on a real fleet: with nginx.conf's
// hash every room's channel has one subscriber (one pod) in Redis; with least_conn
// in its place the members of a room spread over the pods. Both ways every
// subscriber gets every event once, in order: affinity is an optimization only.
// With ROOMCAST_MEASURE=1 it runs at full size and logs Redis's CPU and output bytes
// per published event for both modes.
func TestNginxFleetAffinity(t *testing.T) {
	needNginx(t)
	redistest.Require(t)
	measure := os.Getenv("ROOMCAST_MEASURE") == "1"
	size := fleetSizeCI
	if measure {
		size = fleetSizeMeasure
	}
	subs := size.rooms * size.perRoom
	// nginx holds each stream twice (client and upstream side) and each publish too;
	// this process holds every stream and publish once, the pods their share.
	nginxConns := 2*(subs+fleetPublishers) + 512
	raiseNoFile(t, uint64(subs+fleetPublishers+512), uint64(nginxConns))

	hashed, err := readBounded("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	unhashed, err := withoutAffinity(hashed)
	if err != nil {
		t.Fatal(err)
	}
	c := redistest.StartCluster(t, redistest.ClusterConfig{})
	var pods []string
	for i := range fleetPods {
		p := gatewaytest.Start(t, gatewaytest.Options{
			Name: fmt.Sprintf("pod-%d", i),
			Bin:  gatewayBin,
			// Admission is not what is measured: take every stream at once.
			Args: []string{"--redis", strings.Join(c.Addrs(), ","), "--accept-rate", "0",
				"--drain-delay", "0s", "--drain-window", "0s"},
		})
		pods = append(pods, p.Addr())
	}
	f := &fleet{t: t, c: c, pods: pods, size: size, nginxConns: nginxConns, prefix: redistest.Prefix(t), measure: measure}
	f.hc = &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: fleetPublishers,
		DisableCompression:  true,
	}}
	defer f.hc.CloseIdleConnections()

	var unfollowed fleetResult
	if measure {
		unfollowed = f.publishUnfollowed(hashed)
	}
	results := []fleetResult{f.run("affinity", hashed), f.run("least_conn", unhashed)}
	for _, r := range results {
		if len(r.failures) > 0 {
			t.Errorf("%s: %d failures, the first ones:\n  %s", r.mode, len(r.failures), strings.Join(r.failures[:min(len(r.failures), 10)], "\n  "))
		}
		if r.lost != 0 || r.dups != 0 || r.resyncs != 0 {
			t.Errorf("%s: subscribers lost %d events, got %d twice, %d resyncs; want none", r.mode, r.lost, r.dups, r.resyncs)
		}
	}
	aff, rr := results[0], results[1]
	for i, n := range aff.shardSubs {
		if n != 1 {
			t.Errorf("with affinity, room %d's channel has %d shard subscribers, want 1 (a route of the room is not hashed)", i, n)
		}
	}
	if m := rr.shardMean(); m <= 1.5 {
		t.Errorf("with least_conn, a room's channel has %.2f shard subscribers on average, want > 1.5 (the members of a room should spread over %d pods)", m, fleetPods)
	}
	for _, r := range results {
		t.Logf("%s: %d subscribers over %d rooms, %d events in %s; SHARDNUMSUB per room mean %.2f max %d",
			r.mode, subs, size.rooms, r.published, r.took.Round(time.Millisecond), r.shardMean(), slices.Max(r.shardSubs))
	}
	if measure {
		t.Log("\n" + fleetTable(size, results, unfollowed))
	}
}

// raiseNoFile makes sure this process may open self files and its children (nginx
// sets its own limit to what it needs) up to child: it raises the soft limit to the
// hard one, and fails when the hard limit is lower than either.
func raiseNoFile(t *testing.T, self, child uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if need := max(self, child); lim.Max < need {
		t.Fatalf("RLIMIT_NOFILE hard limit %d is below the %d files this run needs (ulimit -Hn)", lim.Max, need)
	}
	if lim.Cur < self {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
}

// fleet is the running pods and cluster a mode runs against.
type fleet struct {
	t          *testing.T
	c          *redistest.Cluster
	pods       []string
	size       fleetSize
	nginxConns int
	prefix     string
	hc         *http.Client
	measure    bool // measure the idle background too
}

// nginx runs conf in front of the pods until the returned stop.
func (f *fleet) nginx(conf []byte) (base string, logs func() string, stop func()) {
	f.t.Helper()
	addr, logs, stop, err := runNginxSized(f.nginxConns, func(listen string) string {
		return renderNginx(conf, listen, f.pods...)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return "http://" + addr, logs, stop
}

// run opens every subscriber through nginx running conf, reads each room's shard
// subscriptions, publishes every event through nginx and waits until every
// subscriber has them all, with Redis's counters read around the publishing.
func (f *fleet) run(mode string, conf []byte) fleetResult {
	t := f.t
	t.Helper()
	base, logs, stop := f.nginx(conf)
	defer stop()
	res := fleetResult{mode: mode}
	rooms := make([]string, f.size.rooms)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("%s.%s.%d", f.prefix, mode, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Subscribers connect in a shuffled order, so that without affinity a room's
	// members reach the pods as a browser's would, not in lockstep.
	order := make([]int, len(rooms)*f.size.perRoom)
	for i := range order {
		order[i] = i % len(rooms)
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	subs := make([]*fleetSubscriber, len(order))
	ph := &fleetPhases{hold: make(chan struct{}), gate: make(chan struct{}, 64)}
	for i, r := range order {
		s := &fleetSubscriber{room: rooms[r], want: uint64(f.size.events), path: "/rooms/" + rooms[r] + "/events"}
		if i%3 == 2 {
			// A multiplexed stream, keyed by its first room argument.
			s.path = "/events?room=" + rooms[r]
		}
		s.tracker.ExpectFirst(1)
		s.tracker.ResyncIsHead()
		subs[i] = s
		ph.opened.Add(1)
		ph.complete.Add(1)
		ph.exited.Add(1)
		go s.follow(ctx, f.hc, base, ph)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(ph.hold)
			cancel() // a stream still reading (after a failure) ends too
			ph.exited.Wait()
		}
	}
	defer release()
	ph.opened.Wait()
	for _, s := range subs {
		if s.err != nil {
			release()
			t.Fatalf("%s: a subscriber of %s did not open: %v\n%s", mode, s.room, s.err, logs())
		}
	}
	res.shardSubs = f.shardSubscribers(rooms)

	before := f.redisCounters()
	start := time.Now()
	res.published, res.failures = f.publish(ctx, base, rooms)
	if len(res.failures) > 0 {
		cancel() // some events never come: end the streams rather than wait for them
	}
	ph.complete.Wait()
	res.took = time.Since(start)
	res.redis = f.redisCounters().since(before)
	if f.measure {
		// After the publishing, with every member still there: the pods' occupancy
		// records are in their steady refreshes, no longer the first writes.
		res.idle = f.idle()
	}
	release() // the members leave only now: the pods' leaving stays out of the windows
	for _, s := range subs {
		res.lost += s.tracker.Gaps() + (s.want - min(s.want, s.tracker.Last()))
		res.dups += s.tracker.Duplicates
		res.resyncs += s.tracker.Resyncs
		if s.err != nil {
			res.failures = append(res.failures, fmt.Sprintf("subscriber of %s: %v", s.room, s.err))
		}
	}
	return res
}

// publishUnfollowed publishes as many events as a mode does to rooms nobody
// follows, through nginx running conf, and returns what the primaries did meanwhile:
// the cost of a publish without its doorbell pushes.
func (f *fleet) publishUnfollowed(conf []byte) fleetResult {
	t := f.t
	t.Helper()
	base, _, stop := f.nginx(conf)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rooms := make([]string, f.size.rooms)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("%s.unfollowed.%d", f.prefix, i)
	}
	res := fleetResult{mode: "unfollowed"}
	before := f.redisCounters()
	start := time.Now()
	res.published, res.failures = f.publish(ctx, base, rooms)
	res.took = time.Since(start)
	res.redis = f.redisCounters().since(before)
	res.idle = f.idle()
	if len(res.failures) > 0 {
		t.Fatalf("publishing to rooms nobody follows: %s", res.failures[0])
	}
	return res
}

// publish posts events per room to every room through nginx, fleetPublishers at a
// time (at the size's rate, if any), round by round over the rooms, and returns how many were accepted and what
// went wrong.
func (f *fleet) publish(ctx context.Context, base string, rooms []string) (int, []string) {
	jobs := make(chan string)
	var (
		mu        sync.Mutex
		published int
		failures  []string
		wg        sync.WaitGroup
	)
	for range fleetPublishers {
		wg.Go(func() {
			for room := range jobs {
				err := f.publishOne(ctx, base, room)
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				} else {
					published++
				}
				mu.Unlock()
			}
		})
	}
	var pace <-chan time.Time
	if f.size.rate > 0 {
		tick := time.NewTicker(time.Second / time.Duration(f.size.rate))
		defer tick.Stop()
		pace = tick.C
	}
send:
	for range f.size.events {
		for _, room := range rooms {
			if pace != nil {
				select {
				case <-pace:
				case <-ctx.Done():
					break send
				}
			}
			select {
			case jobs <- room:
			case <-ctx.Done():
				break send
			}
		}
	}
	close(jobs)
	wg.Wait()
	return published, failures
}

func (f *fleet) publishOne(ctx context.Context, base, room string) error {
	req, err := gatewaytest.NewRequest(ctx, http.MethodPost, base+"/rooms/"+room+"/events",
		strings.NewReader(`{"text":"affinity"}`), "Content-Type", "application/json")
	if err != nil {
		return err
	}
	res, err := f.hc.Do(req)
	if err != nil {
		return fmt.Errorf("publish to %s: %w", room, err)
	}
	defer res.Body.Close()
	var buf [512]byte
	n, _ := res.Body.Read(buf[:])
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("publish to %s: status %d %s", room, res.StatusCode, buf[:n])
	}
	return nil
}

// shardSubscribers asks, for each room, the primary owning its channel's slot how
// many connections subscribe to the channel (PUBSUB SHARDNUMSUB).
func (f *fleet) shardSubscribers(rooms []string) []int {
	t := f.t
	t.Helper()
	owners := f.c.SlotOwners(t)
	out := make([]int, len(rooms))
	for i, room := range rooms {
		ch := "room:{" + room + "}"
		reply := owners[redistest.Slot(ch)].MustDo(t, "PUBSUB", "SHARDNUMSUB", ch)
		fields := strings.Fields(reply)
		n, err := strconv.Atoi(fields[len(fields)-1])
		if len(fields) != 2 || fields[0] != ch || err != nil {
			t.Fatalf("PUBSUB SHARDNUMSUB %s answered %q", ch, reply)
		}
		out[i] = n
	}
	return out
}

// redisCounters reads the primaries' counters.
func (f *fleet) redisCounters() redisDelta {
	t := f.t
	t.Helper()
	sum := redisDelta{at: time.Now()}
	for _, n := range f.c.Primaries(t) {
		cpu, err1 := n.Info("cpu")
		stats, err2 := n.Info("stats")
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		sum.cpu += infoFloat(t, cpu, "used_cpu_sys") + infoFloat(t, cpu, "used_cpu_user")
		sum.out += int64(infoFloat(t, stats, "total_net_output_bytes"))
		sum.replOut += int64(infoFloat(t, stats, "total_net_repl_output_bytes"))
		sum.commands += int64(infoFloat(t, stats, "total_commands_processed"))
	}
	return sum
}

func (d redisDelta) since(before redisDelta) redisDelta {
	return redisDelta{cpu: d.cpu - before.cpu, out: d.out - before.out, replOut: d.replOut - before.replOut,
		commands: d.commands - before.commands, dur: d.at.Sub(before.at)}
}

// net is d less what idle, a window without publishes, did over as long.
func (d redisDelta) net(idle redisDelta) redisDelta {
	if idle.dur <= 0 {
		return d
	}
	k := float64(d.dur) / float64(idle.dur)
	return redisDelta{cpu: d.cpu - k*idle.cpu, out: d.out - int64(k*float64(idle.out)),
		replOut: d.replOut - int64(k*float64(idle.replOut)), commands: d.commands - int64(k*float64(idle.commands)), dur: d.dur}
}

// fleetIdleWindow is how long a measurement watches the primaries while nothing is
// published, for their background work (cron, the pods' occupancy records and
// health checks), which the figures per event are given without too.
const fleetIdleWindow = 5 * time.Second

// idle reads the primaries' counters over fleetIdleWindow, with nothing published.
func (f *fleet) idle() redisDelta {
	f.t.Helper()
	before := f.redisCounters()
	time.Sleep(fleetIdleWindow) // a measurement window, not a wait for an event
	return f.redisCounters().since(before)
}

func infoFloat(t *testing.T, m map[string]string, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(m[key], 64)
	if err != nil {
		t.Fatalf("INFO has no number %s (%q)", key, m[key])
	}
	return v
}

// fleetSubscriber is one stream of one room through nginx, read by the shared
// decoder and checked by a Tracker.
type fleetSubscriber struct {
	room    string
	path    string // the stream's route: the room's own, or a multiplexed stream of it
	want    uint64 // the events published to the room
	tracker gatewaytest.Tracker
	err     error // why the stream failed; read after the reading goroutine ends
}

// fleetPhases are the points every subscriber of a mode passes: opened (its anchor
// arrived, or it failed), complete (it has every event, or failed), exited. Between
// complete and exited it holds its stream open until hold is closed, so that the
// pods' work when members leave stays out of the measured window. gate bounds the
// streams opening at once.
type fleetPhases struct {
	opened, complete, exited sync.WaitGroup
	hold                     chan struct{}
	gate                     chan struct{}
}

// follow opens the stream and reads it until the tracker has every event.
func (s *fleetSubscriber) follow(ctx context.Context, hc *http.Client, base string, ph *fleetPhases) {
	defer ph.exited.Done()
	ph.gate <- struct{}{}
	var opened, complete bool
	open := func() {
		if !opened {
			opened = true
			<-ph.gate
			ph.opened.Done()
		}
	}
	done := func() {
		if !complete {
			complete = true
			ph.complete.Done()
		}
	}
	defer done()
	defer open()
	s.err = s.read(ctx, hc, base, open, func() {
		done()
		select {
		case <-ph.hold:
		case <-ctx.Done():
		}
	})
}

// read reads the stream, calling opened at its anchor and complete, with the stream
// still open, once the tracker has every event.
func (s *fleetSubscriber) read(ctx context.Context, hc *http.Client, base string, opened, complete func()) error {
	req, err := gatewaytest.NewRequest(ctx, http.MethodGet, base+s.path, nil)
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
	dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
	for s.tracker.Last() < s.want {
		f, err := dec.NextFrame()
		if err != nil {
			return fmt.Errorf("stream ended after seq %d: %w", s.tracker.Last(), err)
		}
		switch {
		case f.IsAnchor():
			opened()
		case !f.HasData:
			// the retry: hint, a heartbeat
		case f.Event == "resync":
			epoch, seq, err := s.position(f.Data)
			if err != nil {
				return err
			}
			s.tracker.Resync(epoch, seq)
		case f.Event == "":
			epoch, seq, err := s.position(f.Data)
			if err != nil {
				return err
			}
			s.tracker.Observe(epoch, seq)
		default:
			return fmt.Errorf("unexpected event %q: %s", f.Event, f.Data)
		}
	}
	complete()
	return nil
}

// position reads an event's or a resync's room, epoch and seq from its data (the
// id of a multiplexed stream is a token of every room's position).
func (s *fleetSubscriber) position(data string) ([]byte, uint64, error) {
	room, ok1 := gatewaytest.StringAfter([]byte(data), []byte(`"room":"`))
	epoch, ok2 := gatewaytest.StringAfter([]byte(data), []byte(`"epoch":"`))
	seq, ok3 := gatewaytest.UintAfter([]byte(data), []byte(`"seq":`))
	if !ok1 || !ok2 || !ok3 || string(room) != s.room {
		return nil, 0, fmt.Errorf("%s: data %.200s is not an event of room %s", s.path, data, s.room)
	}
	return epoch, seq, nil
}

// fleetTable renders both modes' figures per published event as deploy/README.md
// shows them, beside the same publishes to rooms nobody follows. The figures "net"
// leave out what the primaries did over as long a window without publishes.
func fleetTable(size fleetSize, results []fleetResult, unfollowed fleetResult) string {
	aff, rr := results[0], results[1]
	per := func(r fleetResult, v float64) float64 { return v / float64(r.published) }
	cpu := func(r fleetResult) float64 { return per(r, r.redis.cpu) * 1e6 }
	cpuNet := func(r fleetResult) float64 { return per(r, r.redis.net(r.idle).cpu) * 1e6 }
	// total_net_output_bytes counts the replication stream too (Redis 7.0 and
	// later); total_net_repl_output_bytes is that stream alone.
	out := func(r fleetResult) float64 { return per(r, float64(r.redis.out)) }
	outNet := func(r fleetResult) float64 { return per(r, float64(r.redis.net(r.idle).out)) }
	repl := func(r fleetResult) float64 { return per(r, float64(r.redis.net(r.idle).replOut)) }
	clients := func(r fleetResult) float64 { return outNet(r) - repl(r) }
	pushes := func(r fleetResult) float64 { return clients(r) - clients(unfollowed) }
	cmds := func(r fleetResult) float64 { return per(r, float64(r.redis.net(r.idle).commands)) }
	rate := func(r fleetResult) float64 { return float64(r.published) / r.took.Seconds() }
	idle := func(r fleetResult) string {
		s := r.idle.dur.Seconds()
		return fmt.Sprintf("%.1f ms, %.1f KiB, %.0f", r.idle.cpu/s*1e3, float64(r.idle.out)/s/1024, float64(r.idle.commands)/s)
	}
	f0, f1, f2 := func(v float64) string { return fmt.Sprintf("%.0f", v) }, func(v float64) string { return fmt.Sprintf("%.1f", v) },
		func(v float64) string { return fmt.Sprintf("%.2f", v) }
	type row struct {
		what           string
		a, b, ratio, u string
	}
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2fx", b/a) }
	rows := []row{
		{"shard subscriptions per room (SHARDNUMSUB): mean, max",
			fmt.Sprintf("%.2f, %d", aff.shardMean(), slices.Max(aff.shardSubs)),
			fmt.Sprintf("%.2f, %d", rr.shardMean(), slices.Max(rr.shardSubs)), ratio(aff.shardMean(), rr.shardMean()), "0"},
		{"Redis CPU per event, µs (used_cpu_sys+user, 3 primaries)", f1(cpu(aff)), f1(cpu(rr)), ratio(cpu(aff), cpu(rr)), f1(cpu(unfollowed))},
		{"the same, net of idle", f1(cpuNet(aff)), f1(cpuNet(rr)), ratio(cpuNet(aff), cpuNet(rr)), f1(cpuNet(unfollowed))},
		{"bytes Redis sends per event, to replicas and clients (total_net_output_bytes)", f0(out(aff)), f0(out(rr)), ratio(out(aff), out(rr)), f0(out(unfollowed))},
		{"the same, net of idle", f0(outNet(aff)), f0(outNet(rr)), ratio(outNet(aff), outNet(rr)), f0(outNet(unfollowed))},
		{"of which to replicas (total_net_repl_output_bytes, net)", f0(repl(aff)), f0(repl(rr)), ratio(repl(aff), repl(rr)), f0(repl(unfollowed))},
		{"of which to the pods: publish replies and doorbell pushes (net)", f0(clients(aff)), f0(clients(rr)), ratio(clients(aff), clients(rr)), f0(clients(unfollowed))},
		{"of which doorbell pushes (less the replies: rooms nobody follows)", f0(pushes(aff)), f0(pushes(rr)), ratio(pushes(aff), pushes(rr)), ""},
		{"doorbell bytes per shard subscriber", f0(pushes(aff) / aff.shardMean()), f0(pushes(rr) / rr.shardMean()), "", ""},
		{"commands per event, net (total_commands_processed)", f2(cmds(aff)), f2(cmds(rr)), ratio(cmds(aff), cmds(rr)), f2(cmds(unfollowed))},
		{"idle, per second: CPU, bytes sent, commands", idle(aff), idle(rr), "", idle(unfollowed)},
		{"events published; per second until all delivered", fmt.Sprintf("%d; %.0f", aff.published, rate(aff)),
			fmt.Sprintf("%d; %.0f", rr.published, rate(rr)), "", fmt.Sprintf("%d; %.0f", unfollowed.published, rate(unfollowed))},
		{"lost, duplicates", fmt.Sprintf("%d, %d", aff.lost, aff.dups), fmt.Sprintf("%d, %d", rr.lost, rr.dups), "", ""},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| %d subscribers over %d rooms, %d pods, %d publishes/s | affinity (hash) | least_conn | least_conn / affinity | rooms nobody follows |\n|---|---|---|---|---|\n",
		size.rooms*size.perRoom, size.rooms, fleetPods, size.rate)
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.what, r.a, r.b, r.ratio, r.u)
	}
	return b.String()
}
