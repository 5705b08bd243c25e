package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/rooms"
)

// A heartbeat too short to halve (the stream ticks at half of it) would panic every
// stream: New refuses it.
func TestNewRefusesAHeartbeatThatPanicsStreams(t *testing.T) {
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := rooms.New(mem, mem, rooms.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dr, err := drain.New(reg, drain.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = reg.Close(ctx)
		_ = mem.Close(ctx)
	})
	for _, hb := range []time.Duration{time.Nanosecond, -time.Second, time.Millisecond - 1} {
		_, err := gateway.New(mem, reg, dr, gateway.Config{Heartbeat: hb})
		if err == nil || !strings.Contains(err.Error(), "heartbeat") {
			t.Errorf("heartbeat %s: err %v, want a refusal naming the heartbeat", hb, err)
		}
	}
	// A pod id names the pod in the registry and the notices pods send each other.
	for _, id := range []string{"a b", "a\nb", strings.Repeat("p", replay.MaxPodIDLen+1)} {
		_, err := gateway.New(mem, reg, dr, gateway.Config{PodID: id})
		if err == nil || !strings.Contains(err.Error(), "pod id") {
			t.Errorf("pod id %q: err %v, want a refusal naming the pod id", id, err)
		}
	}
}
