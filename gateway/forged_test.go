package gateway_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestFleetForgedDoorbellsNeverReachMembers: a client with SPUBLISH rights rings the
// room's shard channel with malformed and forged doorbells, several claiming the
// next seq. Members get every real event, in order, each a well-formed envelope, and
// nothing else.
func TestFleetForgedDoorbellsNeverReachMembers(t *testing.T) {
	s := redistest.SharedStandalone(t)
	p := newFleetPod(t, s, replay.RedisConfig{}, podConfig{})
	room := redistest.Prefix(t)
	st := p.subscribe(t, room, "")
	st.nextAny() // retry: the member has joined
	first := p.publish(t, room, `{"i":1}`)
	if f := st.next(); f.id != first {
		t.Fatalf("first event %+v, want id %s", f, first)
	}
	epoch, _, _ := strings.Cut(first, ":")
	for _, msg := range []string{
		epoch + " 2 1700000000000 t\n{\"a\":",            // body not JSON
		epoch + " 2 1700000000000 t\n{\"a\":\"b\nc\"}",   // raw newline: a second data line
		epoch + " 2 1700000000000 resync\n{\"seq\":999}", // reserved type
		epoch + " 2 1700000000000 ReSync\n{}",            // reserved in another case
		epoch + " 2 1700000000000 error\n{}",             // EventSource's own event
		"bad{epoch} 2 1700000000000 t\n{}",               // bad epoch
		epoch + " 0 1700000000000 t\n{}",                 // seq 0
		epoch + " 1000000000000000 1700000000000 t\n{}",  // 16 digits
		epoch + " 2 0 t\n{}",                             // ts 0
		epoch + " 2 1700000000000 t\n",                   // no body
	} {
		s.MustDo(t, "SPUBLISH", "room:{"+room+"}", msg)
	}
	var ids []string
	for i := 2; i <= 4; i++ {
		ids = append(ids, p.publish(t, room, `{"i":`+strconv.Itoa(i)+`}`))
	}
	for i, id := range ids {
		f := st.next()
		if f.id != id || f.event != "" {
			t.Fatalf("frame %d: %+v, want the real event %s", i+2, f, id)
		}
		var env struct {
			Room, Epoch, Type string
			Seq               uint64
			TS                int64
			Body              struct{ I int }
		}
		if err := json.Unmarshal([]byte(f.data), &env); err != nil || strings.Contains(f.data, "\n") {
			t.Fatalf("frame %d: envelope %q: %v", i+2, f.data, err)
		}
		if env.Room != room || env.Epoch != epoch || env.Seq != uint64(i+2) || env.Type != "message" || env.Body.I != i+2 || env.TS <= 0 {
			t.Fatalf("frame %d: envelope %+v", i+2, env)
		}
	}
}
