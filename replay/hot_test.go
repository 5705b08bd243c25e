package replay_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// podsPerPartition returns n pod ids for each of k partitions, by HotPartition.
func podsPerPartition(k, n int) [][]string {
	out := make([][]string, k)
	for i, full := 0, 0; full < k; i++ {
		id := fmt.Sprintf("gateway-%d", i)
		p := replay.HotPartition(id, k)
		if len(out[p]) < n {
			out[p] = append(out[p], id)
			if len(out[p]) == n {
				full++
			}
		}
	}
	return out
}

// recvSeqs reads n event rings (zero rings skipped) and returns their seqs.
func (r *ringRecorder) recvSeqs(t *testing.T, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for range n {
		seqs = append(seqs, r.next(t, 10*time.Second).Seq)
	}
	return seqs
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestRedisHotRoomPartitions(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	room := redistest.Prefix(t) + ".hot"
	cold := redistest.Prefix(t) + ".cold"
	const k = 4
	ids := podsPerPartition(k, 1)
	var pods []*replay.RedisLog
	var recs, coldRecs []*ringRecorder
	for p := range k {
		l := newRedisLog(t, c.Addrs(), replay.RedisConfig{HotRooms: []string{room}, HotPartitions: k, PodID: ids[p][0]})
		pods = append(pods, l)
		recs = append(recs, subscribeRec(t, l, room))
		coldRecs = append(coldRecs, subscribeRec(t, l, cold))
	}

	// Each pod listens on its own sub-channel, none on the room's channel; the
	// sub-channels sit in different slots. A room that is not hot is unchanged.
	slots := map[int]bool{}
	for p := range k {
		ch := replay.HotChannel(room, p)
		if !strings.HasPrefix(ch, "room:{") || strings.Count(ch, "{") != 1 {
			t.Fatalf("sub-channel %q: not under room: with one hash tag", ch)
		}
		slots[redistest.Slot(ch)] = true
		if n := shardNumSub(t, c.NodeForKey(t, ch), ch); n != 1 {
			t.Fatalf("%s: %d subscribers, want 1", ch, n)
		}
	}
	if len(slots) != k {
		t.Fatalf("sub-channels of %q share slots: %v", room, slots)
	}
	own := "room:{" + room + "}"
	if n := shardNumSub(t, c.NodeForKey(t, own), own); n != 0 {
		t.Fatalf("%s: %d subscribers, want 0 (every pod is on a sub-channel)", own, n)
	}
	coldCh := "room:{" + cold + "}"
	if n := shardNumSub(t, c.NodeForKey(t, coldCh), coldCh); n != k {
		t.Fatalf("%s: %d subscribers, want %d", coldCh, n, k)
	}

	// Every pod hears every event in order, whichever pod publishes it.
	const n = 40
	for i := range n {
		mustAppend(t, pods[i%k], room, msgN(i))
		mustAppend(t, pods[(i+1)%k], cold, msgN(i))
	}
	for p := range k {
		for i := range n {
			ev := recs[p].next(t, 10*time.Second)
			if ev.Seq != uint64(i+1) || ev.Room != room || string(ev.Body) != fmt.Sprintf(`{"n":%d}`, i) || ev.TS <= 0 || ev.Epoch == "" {
				t.Fatalf("pod %d ring %d: %+v", p, i, ev)
			}
		}
		if got := coldRecs[p].recvSeqs(t, n); !slices.Equal(got, seqRange(1, n)) {
			t.Fatalf("pod %d, room not hot: seqs %v", p, got)
		}
	}
	// A batch rings the sub-channels too.
	if _, errs := pods[1].AppendBatch(t.Context(), []string{room, cold, room}, []replay.Message{msgN(n), msgN(n), msgN(n + 1)}); errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("batch: %v", errs)
	}
	for p := range k {
		if got := recs[p].recvSeqs(t, 2); !slices.Equal(got, []uint64{n + 1, n + 2}) {
			t.Fatalf("pod %d after the batch: seqs %v", p, got)
		}
	}
	var rings uint64
	for _, l := range pods {
		st := l.Stats()
		rings += st.HotRings
		if st.HotRingErrors != 0 {
			t.Fatalf("ring errors: %+v", st)
		}
	}
	if rings != (n+2)*k {
		t.Fatalf("%d sub-channel rings, want %d", rings, (n+2)*k)
	}
}

func TestRedisHotRoomLostRingIsSeen(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	room := redistest.Prefix(t) + ".lost"
	const k = 2
	ids := podsPerPartition(k, 1)
	// The check runs only when the test says (CheckHotRooms).
	cfg := func(id string) replay.RedisConfig {
		return replay.RedisConfig{HotRooms: []string{room[:len(room)-2] + "*"}, HotPartitions: k, PodID: id, HotCheckInterval: time.Hour}
	}
	pub := newRedisLog(t, c.Addrs(), cfg(ids[0][0]))
	sub := newRedisLog(t, c.Addrs(), cfg(ids[1][0]))
	rec := subscribeRec(t, sub, room)
	lost := replay.HotChannel(room, 1)
	replay.SkipHotRings(pub, func(ch string, ev replay.Event) bool {
		return ch == lost && (ev.Seq == 3 || ev.Seq == 5)
	})

	// A lost ring in the middle: the next event shows the gap (4 after 2), and the
	// reader repairs from the log.
	for i := range 4 {
		mustAppend(t, pub, room, msgN(i))
	}
	if got := rec.recvSeqs(t, 3); !slices.Equal(got, []uint64{1, 2, 4}) {
		t.Fatalf("rings %v, want [1 2 4]", got)
	}
	// A lost ring at the end: the periodic check sees the head ahead of the last
	// doorbell and rings a zero Event (read the log).
	mustAppend(t, pub, room, msgN(4))
	replay.CheckHotRooms(sub)
	select {
	case ev := <-rec.ch:
		if ev.Seq != 0 {
			t.Fatalf("ring %+v, want a zero ring", ev)
		}
	default:
		t.Fatal("the check rang nothing for a head ahead of the last doorbell")
	}
	// Once rung, the same head rings nothing more: the next ring is seq 6's.
	replay.CheckHotRooms(sub)
	mustAppend(t, pub, room, msgN(5))
	select {
	case ev := <-rec.ch:
		if ev.Seq != 6 {
			t.Fatalf("ring %+v, want seq 6", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ring for seq 6")
	}
	if st := sub.Stats(); st.HotCheckRepairs != 1 {
		t.Fatalf("check repairs %d, want 1", st.HotCheckRepairs)
	}
}

func TestRedisHotConfig(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	for _, tc := range []struct {
		name string
		cfg  replay.RedisConfig
	}{
		{"no pod id", replay.RedisConfig{HotRooms: []string{"a"}}},
		{"pod id with a space", replay.RedisConfig{HotRooms: []string{"a"}, PodID: "a b"}},
		{"bad pattern", replay.RedisConfig{HotRooms: []string{"a{b}"}, PodID: "p"}},
		{"star inside", replay.RedisConfig{HotRooms: []string{"a*b"}, PodID: "p"}},
		{"one partition", replay.RedisConfig{HotRooms: []string{"a"}, PodID: "p", HotPartitions: 1}},
		{"too many partitions", replay.RedisConfig{HotRooms: []string{"a"}, PodID: "p", HotPartitions: replay.MaxHotPartitions + 1}},
		{"negative interval", replay.RedisConfig{HotRooms: []string{"a"}, PodID: "p", HotCheckInterval: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Addrs = s.Addrs()
			if l, err := replay.NewRedisLog(t.Context(), tc.cfg); err == nil {
				l.Close(t.Context())
				t.Fatal("accepted")
			}
		})
	}
}

func TestParseHotRooms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"lobby", []string{"lobby"}, true},
		{" lobby , team-*,,lobby ", []string{"lobby", "team-*"}, true},
		{"*", []string{"*"}, true},
		{"a#0", nil, false},
		{"a{b", nil, false},
		{"**", nil, false},
		{"a*b", nil, false},
		{strings.Repeat("a", 129), nil, false},
		{strings.Repeat("a", 128) + "*", nil, false},
	} {
		got, err := replay.ParseHotRooms(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("ParseHotRooms(%q) = %q, %v", tc.in, got, err)
		}
	}
	many := strings.Repeat("r,", replay.MaxHotPatterns)
	for i := range replay.MaxHotPatterns + 1 {
		many += fmt.Sprintf("r%d,", i)
	}
	if _, err := replay.ParseHotRooms(many); err == nil {
		t.Errorf("%d patterns accepted", replay.MaxHotPatterns+1)
	}
}

func FuzzParseHotRooms(f *testing.F) {
	for _, s := range []string{"", "lobby", "team-*,lobby", "*", "a{b}*", "a,,b", "\x00*", "é*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pats, err := replay.ParseHotRooms(s)
		if err != nil {
			return
		}
		if len(pats) > replay.MaxHotPatterns {
			t.Fatalf("%d patterns", len(pats))
		}
		for _, p := range pats {
			if !replay.ValidHotPattern(p) {
				t.Fatalf("invalid pattern %q accepted", p)
			}
			room := strings.TrimSuffix(p, "*")
			if room == "" {
				continue
			}
			// A sub-channel keeps one hash tag, under room:, and no real room's
			// channel is one.
			ch := replay.HotChannel(room, 0)
			if strings.Count(ch, "{") != 1 || strings.Count(ch, "}") != 1 || replay.ValidRoom(ch[len("room:{"):len(ch)-1]) {
				t.Fatalf("sub-channel %q", ch)
			}
		}
	})
}

// TestRedisHotRoomACL: with every room hot, the documented ACL grants the sub-channel
// rings and subscriptions: a log does all a pod does and Redis refused nothing.
func TestRedisHotRoomACL(t *testing.T) {
	t.Parallel()
	srv, cfg := aclStandalone(t)
	cfg.HotRooms, cfg.PodID = []string{"*"}, "gateway-0"
	l := newRedisLog(t, []string{srv.Addr}, cfg)
	exerciseLog(t, l)
	refusedNone(t, srv, "the log")
	if st := l.Stats(); st.HotRings == 0 || st.HotRingErrors != 0 {
		t.Fatalf("stats %+v: want sub-channel rings and no error", st)
	}
}

// TestRedisHotRoomSubscriberKilled: a pod whose sub-channel connection is killed
// resubscribes to the same sub-channel and rings a zero Event (read the log), as for
// a room's own channel.
func TestRedisHotRoomSubscriberKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.Standalone(t)
	room := redistest.Prefix(t) + ".kill"
	ids := podsPerPartition(2, 1)
	cfg := func(id string) replay.RedisConfig {
		return replay.RedisConfig{HotRooms: []string{room}, HotPartitions: 2, PodID: id, HotCheckInterval: time.Hour}
	}
	pub := newRedisLog(t, srv.Addrs(), cfg(ids[0][0]))
	sub := newRedisLog(t, srv.Addrs(), cfg(ids[1][0]))
	rec := subscribeRec(t, sub, room)
	mustAppend(t, pub, room, msgN(1))
	if ev := rec.next(t, 10*time.Second); ev.Seq != 1 {
		t.Fatalf("ring %+v, want seq 1", ev)
	}
	srv.MustDo(t, "CLIENT", "KILL", "TYPE", "pubsub")
	rec.zero(t, 30*time.Second)
	if n := shardNumSub(t, srv.Node, replay.HotChannel(room, 1)); n != 1 {
		t.Fatalf("%d subscribers on the sub-channel after the kill, want 1", n)
	}
	mustAppend(t, pub, room, msgN(2))
	if ev := rec.next(t, 10*time.Second); ev.Seq != 2 {
		t.Fatalf("ring %+v, want seq 2", ev)
	}
}

// TestHotRoomPatternsMatchLikeGrants: a prefix pattern matches the rooms that extend
// it, as an access grant does, not its bare prefix.
func TestHotRoomPatternsMatchLikeGrants(t *testing.T) {
	for _, tc := range []struct {
		patterns []string
		room     string
		want     bool
	}{
		{[]string{"team-7.*"}, "team-7.a", true},
		{[]string{"team-7.*"}, "team-7.", false},
		{[]string{"team-7.*"}, "team-70", false},
		{[]string{"lobby"}, "lobby", true},
		{[]string{"lobby"}, "lobby2", false},
		{[]string{"*"}, "x", true},
	} {
		if got := replay.HotMatch(tc.patterns, tc.room); got != tc.want {
			t.Errorf("%q hot for %q: %v, want %v", tc.room, tc.patterns, got, tc.want)
		}
	}
}
