package replay_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestRedisPublishTTLAfterAnOlderLibrary: during a rollout an older pod may load its
// roomcast_v1, which lacks publish_ttl, over the newer one; the next publish with a
// TTL of a newer pod loads the full library again and succeeds with its deadline,
// and publishing without one never needs the newer function.
func TestRedisPublishTTLAfterAnOlderLibrary(t *testing.T) {
	t.Parallel()
	s := redistest.StandaloneWith(t, redistest.Options{})
	l := newRedisLog(t, []string{s.Addr}, replay.RedisConfig{})
	loadOlderLibrary(t, s, "publish_ttl")
	ctx := context.Background()
	room := redistest.Prefix(t)
	mustAppend(t, l, room, msgN(1))
	if r := l.Stats().Reloads; r != 0 {
		t.Fatalf("%d reloads for a publish without a TTL, want 0", r)
	}
	ev, err := l.Append(ctx, room, replay.Message{Body: json.RawMessage(`"reboot"`), TTL: time.Minute})
	if err != nil || ev.Seq != 2 || ev.Expires != ev.TS+60_000 {
		t.Fatalf("publish with a TTL over the older library: %+v, %v", ev, err)
	}
	if r := l.Stats().Reloads; r != 1 {
		t.Fatalf("%d reloads, want 1", r)
	}
	evs, _, err := l.Since(ctx, room, replay.Position{}, 10)
	if err != nil || len(evs) != 2 || evs[0].Expires != 0 || evs[1].Expires != ev.Expires {
		t.Fatalf("since: %+v, %v", evs, err)
	}
}
