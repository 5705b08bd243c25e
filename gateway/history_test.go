package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
)

// shortLog cuts every history read at max events, as a log whose own read limit is
// below the gateway's replay batch does.
type shortLog struct {
	*replay.MemoryLog
	max int
}

// Unwrap is the log it wraps, whose control plane it has (replay.ControlOf).
func (l *shortLog) Unwrap() replay.Log { return l.MemoryLog }

func (l *shortLog) Since(ctx context.Context, room string, after replay.Position, limit int) ([]replay.Event, replay.Position, error) {
	return l.MemoryLog.Since(ctx, room, after, min(limit, l.max))
}

// A history read that the log cuts short of the replay batch is not the end of
// history: every transport reads on until the head, so a resume gets every event
// in order, not the first few and then live.
func TestReplayReadsOnPastAShortRead(t *testing.T) {
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{History: 100})
	if err != nil {
		t.Fatal(err)
	}
	p := newPodOn(t, &shortLog{MemoryLog: mem, max: 3}, podConfig{gw: gateway.Config{ReplayBatch: 8}})
	const n = 10
	var ids []string
	for range n {
		ids = append(ids, p.publish(t, "h", `1`))
	}
	p.publish(t, "g", `1`)
	epoch, _, _ := strings.Cut(ids[0], ":")

	t.Run("stream", func(t *testing.T) {
		s := p.subscribe(t, "h", "", "Last-Event-ID", epoch+":0")
		for i := range n {
			if f := s.next(); f.id != ids[i] {
				t.Fatalf("event %d has id %q, want %q", i+1, f.id, ids[i])
			}
		}
	})
	t.Run("multiplexed", func(t *testing.T) {
		rooms := []string{"g", "h"}
		gEpoch, _, _ := strings.Cut(p.publish(t, "g", `2`), ":")
		tok := replay.FormatToken(rooms, []replay.Position{{Epoch: gEpoch, Seq: 2}, {Epoch: epoch, Seq: 0}}, []bool{false, false})
		s := p.subscribeMany(t, rooms, "", "Last-Event-ID", tok)
		for i := range n {
			if e := s.nextMux(); e.room != "h" || e.pos.String() != ids[i] {
				t.Fatalf("event %d is %s %s, want h %s", i+1, e.room, e.pos, ids[i])
			}
		}
	})
	t.Run("websocket", func(t *testing.T) {
		c := dialWS(t, p)
		c.welcome("history-reader", boot1, map[string]string{"h": epoch + ":0"})
		for i := range n {
			if m := c.next(); m.Kind != "event" || m.ID != ids[i] {
				t.Fatalf("frame %d is %+v, want event %s", i+1, m, ids[i])
			}
		}
	})
}
