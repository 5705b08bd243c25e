package gateway_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// A hot room on four pods, one per sub-channel, with publishes from every pod at
// once (their sub-channel rings may arrive out of order) and from a pod that does not
// know the room is hot (it rings only the room's own channel, which no pod listens
// to: every one of its rings is lost for the others). Every stream gets every event,
// in order, once.
func TestFleetHotRoomEveryPodInOrder(t *testing.T) {
	c := redistest.SharedCluster(t)
	room := redistest.Prefix(t)
	const k = 4
	var pods []*pod
	seen := map[int]bool{}
	for i := 0; len(pods) < k; i++ {
		id := fmt.Sprintf("gateway-%d", i)
		if p := replay.HotPartition(id, k); !seen[p] {
			seen[p] = true
			pods = append(pods, newFleetPod(t, c, replay.RedisConfig{
				HotRooms: []string{room}, HotPartitions: k, PodID: id, HotCheckInterval: 100 * time.Millisecond,
			}, podConfig{}))
		}
	}
	plain := newFleetPod(t, c, replay.RedisConfig{}, podConfig{})
	var streams []*stream
	for _, p := range pods {
		s := p.subscribe(t, room, "")
		s.nextAny()
		streams = append(streams, s)
	}

	const each = 15
	var mu sync.Mutex
	ids := map[uint64]string{}
	var wg sync.WaitGroup
	for w, p := range append(slices.Clone(pods), plain) {
		wg.Go(func() {
			for i := range each {
				id := p.publish(t, room, fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				_, s, _ := strings.Cut(id, ":")
				seq, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					t.Errorf("id %q: %v", id, err)
					return
				}
				mu.Lock()
				ids[seq] = id
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// The last event comes from the pod that rings no sub-channel: only the
	// periodic check can bring it.
	last := plain.publish(t, room, `{"last":true}`)
	n := uint64(len(ids)) + 1
	ids[n] = last
	for p, s := range streams {
		for seq := uint64(1); seq <= n; seq++ {
			if f := s.next(); f.id != ids[seq] {
				t.Fatalf("pod %d, event %d: id %q, want %q", p, seq, f.id, ids[seq])
			}
		}
	}
	var checks uint64
	for _, p := range pods {
		checks += p.log.(*replay.RedisLog).Stats().HotCheckRepairs
	}
	if checks == 0 {
		t.Fatal("no pod's check rang: the last event came another way")
	}
}
