package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

var (
	_ replay.Tickets     = (*replay.MemoryLog)(nil)
	_ replay.Revocations = (*replay.MemoryLog)(nil)
)

func TestMemoryControl(t *testing.T) {
	runControl(t, func(t *testing.T) controlEnv {
		clock := replaytest.NewClock(time.Now())
		l, err := replay.NewMemoryLog(replay.MemoryConfig{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		return controlEnv{a: l, b: l, now: clock.Now, pass: func(_ *testing.T, d time.Duration) { clock.Advance(d) }}
	})
}
