package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestEPodsRoundRobinEdges(t *testing.T) {
	for _, c := range []struct {
		pods, members int
		want          float64
	}{
		{1, 1, 1},
		{1, 5000, 1},          // one pod holds every room
		{8, 1, 1},             // one member is on one pod
		{3, 3, 3 * 19.0 / 27}, // 3·(1 − (2/3)^3)
		{2, 2, 1.5},
		{3, 1000, 3},      // members ≫ pods: every pod
		{100, 10000, 100}, // idem
	} {
		if got := EPodsRoundRobin(c.pods, c.members); !near(got, c.want, 1e-9) {
			t.Errorf("E(P=%d, M=%d) = %v, want %v", c.pods, c.members, got, c.want)
		}
	}
	// Never more than the pods or the members, and growing with the members.
	for p := 1; p <= 20; p++ {
		prev := 0.0
		for m := 1; m <= 60; m++ {
			e := EPodsRoundRobin(p, m)
			if e > float64(min(p, m))+1e-9 || e < prev-1e-12 {
				t.Fatalf("E(P=%d, M=%d) = %v after %v", p, m, e, prev)
			}
			prev = e
		}
	}
}

// TestEPodsRoundRobinIsTheMean checks the formula against placing members at
// random: it is the mean number of distinct pods.
func TestEPodsRoundRobinIsTheMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const trials = 20000
	for _, c := range [][2]int{{3, 4}, {5, 7}, {12, 3}, {2, 10}} {
		pods, members := c[0], c[1]
		var sum int
		seen := make([]bool, pods)
		for range trials {
			clear(seen)
			for range members {
				p := rng.IntN(pods)
				if !seen[p] {
					seen[p] = true
					sum++
				}
			}
		}
		sim := float64(sum) / trials
		if e := EPodsRoundRobin(pods, members); !near(sim, e, 0.01*e) {
			t.Errorf("P=%d M=%d: simulated %v, formula %v", pods, members, sim, e)
		}
	}
}

func TestEPodsRangeIsTheAverage(t *testing.T) {
	for _, c := range [][3]int{{3, 3, 5}, {12, 2, 20}, {1, 1, 9}, {7, 40, 41}} {
		pods, lo, hi := c[0], c[1], c[2]
		var rr, af float64
		for m := lo; m <= hi; m++ {
			rr += EPodsRoundRobin(pods, m)
			af += EPodsAffinity(pods, m, 3)
		}
		n := float64(hi - lo + 1)
		if got := meanEPodsRoundRobin(pods, lo, hi); !near(got, rr/n, 1e-9) {
			t.Errorf("round-robin P=%d %d-%d: %v, want %v", pods, lo, hi, got, rr/n)
		}
		if got := meanEPodsAffinity(pods, lo, hi, 3); !near(got, af/n, 1e-9) {
			t.Errorf("affinity P=%d %d-%d: %v, want %v", pods, lo, hi, got, af/n)
		}
	}
}

func TestEPodsAffinity(t *testing.T) {
	for _, c := range []struct {
		pods, members int
		perPod        float64
		want          float64
	}{
		{10, 5000, 0, 1},     // unknown capacity: the room is taken to fit one pod
		{10, 5000, 5000, 1},  // fits exactly
		{10, 5001, 5000, 2},  // one more member needs a second pod
		{10, 12500, 5000, 3}, // ceil(2.5)
		{2, 12500, 5000, 2},  // never more than the pods
		{1, 3, 1, 1},
	} {
		if got := EPodsAffinity(c.pods, c.members, c.perPod); got != c.want {
			t.Errorf("affinity P=%d M=%d C=%v: %v, want %v", c.pods, c.members, c.perPod, got, c.want)
		}
	}
}

func baseInputs() Inputs {
	return Inputs{Pods: 3, Rooms: 1000, MembersMin: 4, MembersMax: 4, PublishRate: 2000, Payload: 256,
		Routing: RoundRobin, Redis: Cluster, Shards: 3, RoomNameLen: 16}
}

func f(v float64) *float64 { return &v }

func TestComputeShapes(t *testing.T) {
	in := baseInputs()
	p, err := Compute(in, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e := EPodsRoundRobin(3, 4)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"e_pods", p.EPods, e},
		{"streams", p.Streams, 4000},
		{"streams per pod", p.StreamsPerPod, 4000.0 / 3},
		{"ssubscribes", p.SSubscribes, 1000 * e},
		{"ssubscribes per pod", p.SSubscribesPerPod, 1000 * e / 3},
		{"redis deliveries", p.RedisDeliveriesPerSec, 2000 * e},
		{"per shard", p.RedisDeliveriesPerSecPerShard, 2000 * e / 3},
		{"redis egress per shard", p.RedisEgressPerSecPerShard, 2000 * e / 3 * float64(p.DoorbellBytes)},
		{"client deliveries per pod", p.ClientDeliveriesPerSecPerPod, 2000 * 4.0 / 3},
		{"client egress per pod", p.ClientEgressPerSecPerPod, 2000 * 4.0 / 3 * float64(p.FrameBytes)},
		{"largest room", p.HotRoomDeliveriesPerSec, 2 * e},
	}
	for _, c := range checks {
		if !near(c.got, c.want, 1e-6*c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if p.FirstLimit != "" || p.FirstScale != nil || p.PodsNeeded != nil {
		t.Errorf("first limit %q, pods needed %v with no limit known", p.FirstLimit, p.PodsNeeded)
	}
	for _, r := range p.Resources {
		if r.Limit != nil || r.Unknown == "" {
			t.Errorf("%s: limit %v, unknown %q", r.Name, r.Limit, r.Unknown)
		}
	}

	// One pod: every room is one subscription on it.
	in.Pods = 1
	p, _ = Compute(in, Limits{})
	if p.EPods != 1 || p.SSubscribes != 1000 || p.SSubscribesPerPod != 1000 {
		t.Errorf("one pod: E %v, ssubscribes %v", p.EPods, p.SSubscribes)
	}

	// Members ≫ pods: every pod follows every room.
	in = baseInputs()
	in.MembersMin, in.MembersMax = 2000, 2000
	p, _ = Compute(in, Limits{})
	if !near(p.EPods, 3, 1e-9) || !near(p.SSubscribesPerPod, 1000, 1e-6) {
		t.Errorf("members >> pods: E %v, ssubscribes per pod %v", p.EPods, p.SSubscribesPerPod)
	}

	// Fewer rooms than shards: the rooms' shards carry it all.
	in = baseInputs()
	in.Rooms, in.Shards = 2, 6
	p, _ = Compute(in, Limits{})
	if p.BusyShards != 2 || !near(p.PublishesPerSecPerShard, 1000, 1e-9) {
		t.Errorf("2 rooms on 6 shards: busy %d, publishes per shard %v", p.BusyShards, p.PublishesPerSecPerShard)
	}
}

func TestComputeAffinity(t *testing.T) {
	in := baseInputs()
	in.Routing = Affinity
	in.Pods, in.Rooms, in.MembersMin, in.MembersMax = 6, 10, 5000, 5000
	p, err := Compute(in, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.EPods != 1 || !hasNote(p, "fit on one pod") {
		t.Errorf("affinity with an unknown pod capacity: E %v, notes %q", p.EPods, p.Notes)
	}
	// 1 GiB, 100 MiB reserved, 100 KiB per stream: 9461 streams per pod, so a room of
	// 20000 takes 3 pods.
	in.MembersMin, in.MembersMax = 20000, 20000
	in.PodMemory, in.ReservedMemory = 1<<30, 100<<20
	p, err = Compute(in, Limits{Source: "x.json", RSSPerConnKiB: f(100)})
	if err != nil {
		t.Fatal(err)
	}
	if *p.StreamsPerPodLimit != 9461 || p.EPods != 3 {
		t.Errorf("streams per pod %v, E %v", *p.StreamsPerPodLimit, p.EPods)
	}
	if p.FirstLimit != PodStreams {
		t.Errorf("first limit %q, want %s", p.FirstLimit, PodStreams)
	}
	// --max-streams caps what memory allows.
	in.MaxStreams = 5000
	p, _ = Compute(in, Limits{Source: "x.json", RSSPerConnKiB: f(100)})
	if *p.StreamsPerPodLimit != 5000 || p.EPods != 4 {
		t.Errorf("with --max-streams 5000: streams per pod %v, E %v", *p.StreamsPerPodLimit, p.EPods)
	}
	p, _ = Compute(in, Limits{})
	if *p.StreamsPerPodLimit != 5000 || p.EPods != 4 {
		t.Errorf("with --max-streams alone: streams per pod %v, E %v", *p.StreamsPerPodLimit, p.EPods)
	}
	in.MaxStreams = 0
	// The fleet cannot hold a room larger than pods × streams per pod.
	in.MembersMin, in.MembersMax = 60000, 60000
	p, _ = Compute(in, Limits{Source: "x.json", RSSPerConnKiB: f(100)})
	if p.EPods != 6 || !hasNote(p, "does not fit") {
		t.Errorf("oversized room: E %v, notes %q", p.EPods, p.Notes)
	}
}

func hasNote(p *Plan, s string) bool {
	for _, n := range p.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

func TestComputeLimits(t *testing.T) {
	in := baseInputs()
	in.PodMemory, in.ReservedMemory = 1280<<20, 256<<20
	in.ShardDeliveryLimit = 100000
	lim := Limits{Source: "fanout.json", DeliveriesPerSec: f(10000), RSSPerConnKiB: f(38), Subscribers: new(int), P99ms: f(12)}
	*lim.Subscribers = 1000
	p, err := Compute(in, lim)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Resource{}
	for _, r := range p.Resources {
		byName[r.Name] = r
	}
	streams := math.Floor(float64(1024<<20) / (38 * 1024))
	if r := byName[PodStreams]; r.Limit == nil || *r.Limit != streams || !near(*r.Utilisation, (4000.0/3)/streams, 1e-12) {
		t.Errorf("pod streams: %+v", r)
	}
	deliv := byName[PodDeliveries]
	if deliv.Limit == nil || !near(*deliv.Scale, 10000/(8000.0/3), 1e-9) {
		t.Errorf("pod deliveries: %+v", deliv)
	}
	if r := byName[PodEgress]; r.Limit != nil || r.Unknown != "the limits file has no egress_bytes_per_sec" {
		t.Errorf("pod egress: %+v", r)
	}
	if r := byName[ShardPublishes]; r.Limit != nil || r.Unknown != "no --shard-publish-limit" {
		t.Errorf("shard publishes: %+v", r)
	}
	if p.FirstLimit != PodDeliveries || *p.FirstScale != *deliv.Scale {
		t.Errorf("first limit %q at %v, want %s", p.FirstLimit, *p.FirstScale, PodDeliveries)
	}
	if !hasNote(p, "more than the 1000 the limits were measured with") || !hasNote(p, "12 ms") {
		t.Errorf("notes %q", p.Notes)
	}
	// 8000 deliveries/s need 1 pod at 10000/s; 4000 streams need 1 pod of 27594.
	if *p.PodsNeeded != 1 || *p.EPodsAtPodsNeeded != 1 || *p.RedisDeliveriesAtPodsNeeded != 2000 {
		t.Errorf("pods needed %d (E %v, deliveries %v), want 1", *p.PodsNeeded, *p.EPodsAtPodsNeeded, *p.RedisDeliveriesAtPodsNeeded)
	}
	if want := 4000.0/3*38*1024 + float64(256<<20); !near(*p.MemoryPerPod, want, 1e-6) {
		t.Errorf("memory per pod %v, want %v", *p.MemoryPerPod, want)
	}
}

// TestPodsNeeded: more load than the pods hold asks for more pods, and under
// round-robin those pods cost Redis more pushes per publish.
func TestPodsNeeded(t *testing.T) {
	in := baseInputs()
	in.Rooms, in.MembersMin, in.MembersMax = 10000, 10, 10
	in.MaxStreams = 20000 // 100,000 streams need 5 pods
	p, err := Compute(in, Limits{Source: "x.json", DeliveriesPerSec: f(5000)})
	if err != nil {
		t.Fatal(err)
	}
	// 2000 events/s × 10 members = 20,000 frames/s: 4 pods of 5000/s; streams need 5.
	if *p.PodsNeeded != 5 || p.FirstLimit != PodStreams || *p.FirstScale >= 1 {
		t.Fatalf("pods needed %v, first limit %q at %v", *p.PodsNeeded, p.FirstLimit, *p.FirstScale)
	}
	if !near(*p.EPodsAtPodsNeeded, EPodsRoundRobin(5, 10), 1e-12) || *p.RedisDeliveriesAtPodsNeeded <= p.RedisDeliveriesPerSec {
		t.Errorf("at 5 pods: E %v, deliveries %v (at 3: %v)", *p.EPodsAtPodsNeeded, *p.RedisDeliveriesAtPodsNeeded, p.RedisDeliveriesPerSec)
	}
	in.Pods = 5
	q, _ := Compute(in, Limits{Source: "x.json", DeliveriesPerSec: f(5000)})
	for _, r := range q.Resources {
		if r.Utilisation != nil && *r.Utilisation > 1 {
			t.Errorf("at the pods needed, %s is at %v", r.Name, *r.Utilisation)
		}
	}
	if *q.PodsNeeded != 5 {
		t.Errorf("at 5 pods, pods needed %d", *q.PodsNeeded)
	}
}

func TestValidateBounds(t *testing.T) {
	for name, mod := range map[string]func(*Inputs){
		"no pods":            func(in *Inputs) { in.Pods = 0 },
		"no rooms":           func(in *Inputs) { in.Rooms = 0 },
		"members reversed":   func(in *Inputs) { in.MembersMin, in.MembersMax = 5, 3 },
		"no members":         func(in *Inputs) { in.MembersMin = 0 },
		"negative rate":      func(in *Inputs) { in.PublishRate = -1 },
		"nan rate":           func(in *Inputs) { in.PublishRate = math.NaN() },
		"no payload":         func(in *Inputs) { in.Payload = 0 },
		"routing":            func(in *Inputs) { in.Routing = "random" },
		"standalone shards":  func(in *Inputs) { in.Redis = Standalone },
		"too many shards":    func(in *Inputs) { in.Shards = 16385 },
		"room name":          func(in *Inputs) { in.RoomNameLen = 129 },
		"reserved too large": func(in *Inputs) { in.PodMemory, in.ReservedMemory = 100, 100 },
		"negative limit":     func(in *Inputs) { in.ShardEgressLimit = -5 },
	} {
		in := baseInputs()
		mod(&in)
		if _, err := Compute(in, Limits{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestFrameBytesIsARealFrame(t *testing.T) {
	want := "id: k3x9q0ab:100000\n" +
		`data: {"room":"rrrr","epoch":"k3x9q0ab","seq":100000,"ts":1760000000000,"type":"message","body":"xxxx"}` + "\n\n"
	if got := FrameBytes(6, 4, SampleSeq); got != len(want) {
		t.Errorf("FrameBytes(6, 4) = %d, want %d", got, len(want))
	}
	// Every payload byte is one frame byte, and a digit more of seq is two.
	if a, b := FrameBytes(100, 8, SampleSeq), FrameBytes(101, 8, SampleSeq); b != a+1 {
		t.Errorf("payload 100: %d, 101: %d", a, b)
	}
	if a, b := FrameBytes(100, 8, 5), FrameBytes(100, 8, 50); b != a+2 {
		t.Errorf("seq 5: %d, 50: %d", a, b)
	}
	if FrameBytes(1, 1, 1) <= 0 {
		t.Error("a one-byte payload has no frame")
	}
}

func TestDoorbellBytesIsARESPPush(t *testing.T) {
	msg := "k3x9q0ab 100000 1760000000000 \n\"xxxx\""
	ch := "room:{rrrr}"
	want := ">3\r\n$8\r\nsmessage\r\n" + fmt.Sprintf("$%d\r\n%s\r\n$%d\r\n%s\r\n", len(ch), ch, len(msg), msg)
	if got := DoorbellBytes(6, 4, SampleSeq); got != len(want) {
		t.Errorf("DoorbellBytes(6, 4) = %d, want %d", got, len(want))
	}
}
