package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/roomcast/roomcast/replay/flight"
	"github.com/roomcast/roomcast/replay/redistest"
)

func TestRedisLibraryHeader(t *testing.T) {
	first, _, _ := strings.Cut(redisLibrarySource, "\n")
	if first != "#!lua name="+RedisLibrary {
		t.Fatalf("library header %q, want name %s", first, RedisLibrary)
	}
	for _, fn := range []string{redisFnPublish, redisFnSince} {
		if !strings.Contains(redisLibrarySource, "'"+fn+"'") || !strings.HasPrefix(fn, RedisLibrary+"_") {
			t.Errorf("function %s not registered under the library's version", fn)
		}
	}
}

func TestDecodeDoorbell(t *testing.T) {
	cases := []struct {
		name string
		msg  string
		ok   bool
		want Event
	}{
		{"typed", "ep1 7 1700000000123 chat\n{\"a\":1}", true,
			Event{Room: "r", Epoch: "ep1", Seq: 7, TS: 1700000000123, Type: "chat", Body: []byte(`{"a":1}`)}},
		{"default type", "ep1 1 5 \n\"x\"", true, Event{Room: "r", Epoch: "ep1", Seq: 1, TS: 5, Body: []byte(`"x"`)}},
		{"body with spaces", "e 2 3 t\n{\"a\": \"b c\"}", true,
			Event{Room: "r", Epoch: "e", Seq: 2, TS: 3, Type: "t", Body: []byte("{\"a\": \"b c\"}")}},
		{"largest seq", "e 999999999999999 3 t\n1", true, Event{Room: "r", Epoch: "e", Seq: MaxSeq, TS: 3, Type: "t", Body: []byte("1")}},
		{"deadline", "e 2 3 t 9\n1", true, Event{Room: "r", Epoch: "e", Seq: 2, TS: 3, Type: "t", Body: []byte("1"), Expires: 9}},
		{"deadline of the default type", "e 2 3  9\n1", true, Event{Room: "r", Epoch: "e", Seq: 2, TS: 3, Body: []byte("1"), Expires: 9}},
		{"deadline zero", "e 2 3 t 0\n1", false, Event{}},
		{"deadline not a number", "e 2 3 t 9x\n1", false, Event{}},
		{"deadline and more", "e 2 3 t 9 9\n1", false, Event{}},
		{"raw newline in body", "e 2 3 t\n{\"a\": \"b\nc\"}", false, Event{}},
		{"raw CR in body", "e 2 3 t\n[1,\r2]", false, Event{}},
		{"body not JSON", "e 2 3 t\n{\"a\":", false, Event{}},
		{"body two values", "e 2 3 t\n1 2", false, Event{}},
		{"reserved type", "e 2 3 resync\n{}", false, Event{}},
		{"reserved type in other case", "e 2 3 ReAuth\n{}", false, Event{}},
		{"type error", "e 2 3 error\n{}", false, Event{}},
		{"type with space", "e 2 3 a b\n{}", false, Event{}},
		{"type too long", "e 2 3 " + strings.Repeat("t", 65) + "\n{}", false, Event{}},
		{"seq 16 digits", "e 1000000000000000 3 t\n1", false, Event{}},
		{"seq leading plus", "e +2 3 t\n1", false, Event{}},
		{"ts zero", "e 1 0 t\n1", false, Event{}},
		{"ts negative", "e 1 -5 t\n1", false, Event{}},
		{"epoch too long", strings.Repeat("e", 33) + " 1 3 t\n1", false, Event{}},
		{"no body", "e 2 3 t\n", false, Event{}},
		{"no newline", "e 2 3 t", false, Event{}},
		{"seq zero", "e 0 3 t\n1", false, Event{}},
		{"bad seq", "e -1 3 t\n1", false, Event{}},
		{"bad epoch", "e{ 1 3 t\n1", false, Event{}},
		{"bad ts", "e 1 x t\n1", false, Event{}},
		{"short header", "e 1\n1", false, Event{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := decodeDoorbell("r", tc.msg)
			if ok != tc.ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("decodeDoorbell(%q) = %+v, %v; want %+v, %v", tc.msg, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestDoorbellPayloadRoundTrip: what a hot room's publisher sends on the
// sub-channels reads back as the event, deadline included.
func TestDoorbellPayloadRoundTrip(t *testing.T) {
	for _, ev := range []Event{
		{Room: "r", Epoch: "e", Seq: 3, TS: 5, Type: "cmd", Body: []byte(`"reboot"`), Expires: 65},
		{Room: "r", Epoch: "e", Seq: 4, TS: 6, Body: []byte(`1`)},
		{Room: "r", Epoch: "e", Seq: 5, TS: 7, Body: []byte(`1`), Expires: 8},
	} {
		got, ok := decodeDoorbell("r", doorbellPayload(ev))
		if !ok || fmt.Sprint(got) != fmt.Sprint(ev) {
			t.Errorf("doorbell of %+v reads back as %+v, %v", ev, got, ok)
		}
	}
}

func FuzzDecodeDoorbell(f *testing.F) {
	f.Add("ep1 7 1700000000123 chat\n{\"a\":1}")
	f.Add("e 1 1 \n1")
	f.Add("e 2 3 resync\n{}")
	f.Add("e 2 3 t\n{\"a\":\"b\nc\"}")
	f.Fuzz(func(t *testing.T, msg string) {
		ev, ok := decodeDoorbell("r", msg)
		if !ok {
			return
		}
		if ev.Seq == 0 || ev.Seq > MaxSeq || ev.TS <= 0 || !validEpoch(ev.Epoch) ||
			(ev.Type != "" && !ValidType(ev.Type)) || !json.Valid(ev.Body) || bytes.ContainsAny(ev.Body, "\r\n") {
			t.Fatalf("accepted %q as %+v", msg, ev)
		}
		// Whatever is accepted makes an envelope that is one line of valid JSON.
		env := ev.AppendJSON(nil)
		if !json.Valid(env) || bytes.ContainsAny(env, "\r\n") {
			t.Fatalf("accepted %q: envelope %q", msg, env)
		}
	})
}

func TestClassify(t *testing.T) {
	// Error replies as rueidis returns them, from a real server.
	s := redistest.SharedStandalone(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	redisErr := func(msg string) error {
		script := "return redis.error_reply('" + msg + "')"
		err := client.Do(context.Background(), client.B().Eval().Script(script).Numkeys(0).Build()).Error()
		if _, ok := rueidis.IsRedisErr(err); !ok || !strings.HasSuffix(msg, err.Error()) {
			t.Fatalf("error reply %q came back as %v", msg, err)
		}
		return err
	}
	cases := []struct {
		name string
		err  error
		want failure
	}{
		{"tryagain", redisErr("TRYAGAIN Multiple keys request during rehashing of slot"), failNotRun},
		{"clusterdown", redisErr("CLUSTERDOWN The cluster is down"), failNotRun},
		{"loading", redisErr("LOADING Redis is loading the dataset in memory"), failNotRun},
		{"masterdown", redisErr("MASTERDOWN Link with MASTER is down"), failNotRun},
		{"moved", redisErr("MOVED 3999 127.0.0.1:6381"), failNotRun},
		{"ask", redisErr("ASK 3999 127.0.0.1:6381"), failNotRun},
		{"readonly", redisErr("READONLY You cannot write against a read only replica."), failNotRun},
		{"no function", redisErr("ERR Function not found"), failNoFunction},
		{"oom", redisErr("OOM command not allowed when used memory > maxmemory."), failFull},
		{"script error", redisErr("ERR roomcast: bad epoch"), failOther},
		{"dial", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, failNotRun},
		{"eof", io.EOF, failUnknown},
		{"reset", &net.OpError{Op: "read", Err: errors.New("connection reset")}, failUnknown},
		{"deadline", context.DeadlineExceeded, failDeadline},
		{"wrapped deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), failDeadline},
		{"no slot", rueidis.ErrNoSlot, failNotRun},
		{"not replicated", fmt.Errorf("%w: %w", ErrUnavailable, errNotReplicated), failOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Fatalf("classify(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

// A shared read that the log refused to start (it closed meanwhile) is ErrClosed.
func TestRefusedSharedReadIsClosed(t *testing.T) {
	var l RedisLog
	if err := l.mapErr(context.Background(), fmt.Errorf("since: %w", flight.ErrRefused)); !errors.Is(err, ErrClosed) {
		t.Fatalf("refused read: %v, want ErrClosed", err)
	}
}
