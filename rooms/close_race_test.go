package rooms

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// A Join racing Close must not create a room Close never sees: Join checks closed at
// the top of its loop, and ref checks it again under the shard lock (Close sets it
// before it takes any shard lock). Without the second check, a Join that reaches the
// shard after Close swept it returns an open member after Close has returned, with a
// bus subscription nobody releases.
//
// The race window is a few instructions wide. To hit it on purpose, the joiner uses a
// very long room name (the registry does not validate names), so hashing it for the
// shard lookup takes milliseconds, and Close runs while the joiner is seen hashing.
func TestJoinRacingClose(t *testing.T) {
	name := strings.Repeat("r", 64<<20)
	for attempt := 1; ; attempt++ {
		l := newMemoryLog(t, replay.MemoryConfig{})
		bus := newFakeBus(l)
		g, err := New(bus, l, Config{Logger: quietLogger(), Linger: -1})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			m   *Member
			err error
		}
		joined := make(chan result, 1)
		go func() {
			m, err := g.Join(context.Background(), name)
			joined <- result{m, err}
		}()
		replaytest.Eventually(t, waitLimit, "the joiner to hash the room name", joinerHashing)
		if err := g.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		inWindow := joinerHashing() // Close finished before the joiner reached the shard
		res := await(t, joined, "join")
		if res.err == nil {
			open, counts := res.m.Reason() == 0, bus.counts()
			g.Leave(res.m) // the leaked room lingers out, so nothing outlives the test
			await(t, bus.unsubscribed, "unsubscribe of the room created after Close")
			if open {
				t.Fatalf("Join racing Close returned an open member of a room created after Close "+
					"swept the shards (bus after Close: %+v)", counts)
			}
			t.Fatalf("Join racing Close returned a member (reason %s), want %v", res.m.Reason(), ErrClosed)
		}
		if !errors.Is(res.err, ErrClosed) {
			t.Fatalf("Join racing Close: err %v, want %v", res.err, ErrClosed)
		}
		if c := bus.counts(); c.Live != 0 {
			t.Fatalf("bus after Close: %+v, want no subscription held", c)
		}
		if inWindow || attempt == 5 {
			return
		}
	}
}

// joinerHashing reports whether a goroutine is inside Registry.ref hashing the room
// name, that is past Join's closed check and not yet holding the shard lock.
func joinerHashing() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("rooms.(*Registry).ref(")) && bytes.Contains(g, []byte("maphash")) {
			return true
		}
	}
	return false
}
