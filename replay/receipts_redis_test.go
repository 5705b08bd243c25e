package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestRedisRecordAcksReloadsLibrary: a node that lost the library (FUNCTION FLUSH,
// a node replaced) gets it again on the first RecordAcks, whose retry then sends
// commands of its own (rueidis recycles a command once it has run; sending the
// first attempt's again panicked) and succeeds.
func TestRedisRecordAcksReloadsLibrary(t *testing.T) {
	t.Parallel()
	s := redistest.StandaloneWith(t, redistest.Options{})
	l := newRedisLog(t, []string{s.Addr}, replay.RedisConfig{})
	r, ok := controlOf(t, l).Owners.(replay.Receipts)
	if !ok {
		t.Fatal("the Redis owners keep no receipts")
	}
	ctx := context.Background()
	p, err := replay.ParsePosition("e1:4")
	if err != nil {
		t.Fatal(err)
	}
	recs := []replay.AckRecord{
		{Client: "anon:a-" + redistest.Prefix(t), Session: "s1", Acks: []replay.Ack{{Room: "inbox", ID: p, At: time.UnixMilli(1_700_000_000_000)}}},
		{Client: "anon:b-" + redistest.Prefix(t), Session: "s1", Acks: []replay.Ack{{Room: "inbox", ID: p, At: time.UnixMilli(1_700_000_000_000)}}},
	}
	s.MustDo(t, "FUNCTION", "FLUSH")
	// Neither client has an owner entry: nothing is stored, but both calls ran.
	if n, err := r.RecordAcks(ctx, recs); err != nil || n != 0 {
		t.Fatalf("record acks after FUNCTION FLUSH: %d, %v; want 0 stored, no error", n, err)
	}
}
