package replaytest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
)

// deadlines: an event published with a TTL carries its deadline, its publish time
// plus the TTL in whole milliseconds (rounded up), in Append's answer, in its ring
// and in every read of the log; one published without has none; a negative TTL is
// refused.
func deadlines(t *testing.T, newLog Factory) {
	l, r := open(t, newLog, 10), room(t)
	ch := subscribe(t, l, r)
	ctx := context.Background()
	ttls := []time.Duration{0, time.Hour, 1500 * time.Microsecond}
	var pub []replay.Event
	for _, ttl := range ttls {
		ev, err := l.Append(ctx, r, replay.Message{Type: "cmd", Body: json.RawMessage(`"reboot"`), TTL: ttl})
		if err != nil {
			t.Fatalf("append with ttl %s: %v", ttl, err)
		}
		pub = append(pub, ev)
	}
	want := []int64{0, pub[1].TS + 3_600_000, pub[2].TS + 2}
	evs, _, err := l.Since(ctx, r, replay.Position{}, 10)
	if err != nil || len(evs) != len(ttls) {
		t.Fatalf("since: %d events, %v", len(evs), err)
	}
	for i := range ttls {
		if pub[i].Expires != want[i] {
			t.Fatalf("append %d (ttl %s): expires %d, want %d", i, ttls[i], pub[i].Expires, want[i])
		}
		if evs[i].Expires != want[i] || evs[i].TS != pub[i].TS {
			t.Fatalf("since %d: %+v, want expires %d", i, evs[i], want[i])
		}
		if ev := next(t, ch); ev.Seq != pub[i].Seq || ev.Expires != want[i] {
			t.Fatalf("ring %d: %+v, want expires %d", i, ev, want[i])
		}
	}
	if _, err := l.Append(ctx, r, replay.Message{Body: json.RawMessage(`1`), TTL: -time.Second}); !errors.Is(err, replay.ErrInvalid) {
		t.Fatalf("negative ttl: %v, want ErrInvalid", err)
	}
}
