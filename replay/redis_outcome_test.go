package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// TestRedisOutcomeUnknown: a publish handed to Redis whose answer did not come back
// in time may run all the same: it is ErrOutcomeUnknown, not a plain "not
// published". One that surely did not reach Redis is ErrUnavailable alone.
func TestRedisOutcomeUnknown(t *testing.T) {
	t.Parallel()
	s := redistest.Standalone(t) // its own server: the test pauses and stops it
	l := newRedisLog(t, s.Addrs(), replay.RedisConfig{Timeout: 300 * time.Millisecond})
	ctx := context.Background()
	room := redistest.Prefix(t) + ".unknown"
	first := mustAppend(t, l, room, msgN(1))
	keyed := msgN(4)
	keyed.IdempotencyKey = "k-unknown"

	// Writes wait while the server is paused.
	s.MustDo(t, "CLIENT", "PAUSE", "2000", "WRITE")
	paused := time.Now()
	if _, err := l.Append(ctx, room, msgN(2)); !errors.Is(err, replay.ErrOutcomeUnknown) || !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("append while writes are paused: %v, want ErrOutcomeUnknown", err)
	}
	if _, errs := l.AppendBatch(ctx, []string{room + ".batch"}, []replay.Message{msgN(1)}); !errors.Is(errs[0], replay.ErrOutcomeUnknown) {
		t.Fatalf("batch append while writes are paused: %v, want ErrOutcomeUnknown", errs[0])
	}
	if _, err := l.Append(ctx, room, keyed); !errors.Is(err, replay.ErrOutcomeUnknown) {
		t.Fatalf("keyed append while writes are paused: %v, want ErrOutcomeUnknown", err)
	}
	if time.Since(paused) > 1800*time.Millisecond {
		t.Fatal("the appends outlasted the pause; the test proves nothing")
	}

	// A retry with the key after the pause publishes at most once. (Whether a paused
	// call ran cannot be told here: rueidis drops a connection whose call timed out,
	// and Redis discards a paused client's command when it disconnects; a reply lost
	// after the command ran looks the same to the caller.)
	var again replay.Event
	replaytest.Eventually(t, 10*time.Second, "the condition", func() error {
		var err error
		again, err = l.Append(ctx, room, keyed)
		return err
	})
	if dup := mustAppend(t, l, room, keyed); dup.Seq != again.Seq {
		t.Fatalf("retries with one key: seq %d then %d", again.Seq, dup.Seq)
	}
	evs, _, err := l.Since(ctx, room, first.Position(), 10)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].Seq != again.Seq {
		t.Fatalf("log after the retries: %+v %v, want it to end at seq %d", evs, err, again.Seq)
	}
	for _, ev := range evs {
		if string(ev.Body) == `{"n":4}` && ev.Seq != again.Seq {
			t.Fatalf("the keyed event twice in the log: %+v", evs)
		}
	}

	// A server that is gone never receives the publish: unavailable, not unknown.
	// The first calls on each of the client's connections write to a socket the
	// server has closed and read EOF, which is all a client ever sees of a server
	// that took a command and died: unknown. Once the connections are found dead,
	// every publish fails to dial: surely not run.
	_, _ = s.Do("SHUTDOWN", "NOSAVE")
	for i := 0; ; i++ {
		_, err := l.Append(ctx, room, msgN(3))
		if !errors.Is(err, replay.ErrUnavailable) {
			t.Fatalf("append to a stopped server: %v, want ErrUnavailable", err)
		}
		if !errors.Is(err, replay.ErrOutcomeUnknown) {
			if !strings.Contains(err.Error(), "refused") {
				t.Fatalf("append to a stopped server: %v, want a refused dial", err)
			}
			break
		}
		if i == 20 {
			t.Fatalf("append to a stopped server: still %v after %d calls", err, i)
		}
	}
	_, errs := l.AppendBatch(ctx, []string{room}, []replay.Message{msgN(3)})
	if !errors.Is(errs[0], replay.ErrUnavailable) || errors.Is(errs[0], replay.ErrOutcomeUnknown) {
		t.Fatalf("batch append to a stopped server: %v, want ErrUnavailable only", errs[0])
	}
}

// replyDropper is a TCP proxy in front of a real server that, while armed, drops
// every reply on a connection from the moment it forwarded a publish on it: a
// command that ran whose answer was lost on the way. (rueidis spreads calls over
// several connections and dials them lazily; a connection's handshake must not be
// dropped, or the publish would never be sent.)
type replyDropper struct {
	ln    net.Listener
	to    string
	armed atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newReplyDropper(t *testing.T, to string) *replyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &replyDropper{ln: ln, to: to}
	d.wg.Go(d.accept)
	t.Cleanup(func() {
		ln.Close()
		d.mu.Lock()
		for _, c := range d.conns {
			c.Close()
		}
		d.mu.Unlock()
		d.wg.Wait()
	})
	return d
}

func (d *replyDropper) accept() {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", d.to)
		if err != nil {
			c.Close()
			continue
		}
		d.mu.Lock()
		d.conns = append(d.conns, c, s)
		d.mu.Unlock()
		var drop atomic.Bool
		d.wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if d.armed.Load() && bytes.Contains(buf[:n], []byte("roomcast_v1_publish")) {
						drop.Store(true)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			s.Close()
			c.Close()
		})
		d.wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && !drop.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
			s.Close()
		})
	}
}

// TestRedisLostReplyIsOutcomeUnknown: Redis ran the publish and its answer was lost.
// The caller gets ErrOutcomeUnknown, and the event is in the log: "not published"
// would have been a lie, and a retry without a key a duplicate.
func TestRedisLostReplyIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	s := redistest.SharedStandalone(t)
	d := newReplyDropper(t, s.Addr)
	l := newRedisLog(t, []string{d.ln.Addr().String()}, replay.RedisConfig{Timeout: 300 * time.Millisecond})
	ctx := context.Background()
	room := redistest.Prefix(t) + ".lost"
	first := mustAppend(t, l, room, msgN(1))

	d.armed.Store(true)
	_, err := l.Append(ctx, room, msgN(2))
	if !errors.Is(err, replay.ErrOutcomeUnknown) {
		t.Fatalf("append whose reply was lost: %v, want ErrOutcomeUnknown", err)
	}
	d.armed.Store(false)
	// Read it from the server itself (the proxy may still be forwarding).
	direct := newRedisLog(t, s.Addrs(), replay.RedisConfig{})
	replaytest.Eventually(t, 10*time.Second, "the condition", func() error {
		evs, _, err := direct.Since(ctx, room, first.Position(), 10)
		if err != nil || len(evs) != 1 || string(evs[0].Body) != `{"n":2}` {
			return fmt.Errorf("log after the lost reply: %+v %v, want the event", evs, err)
		}
		return nil
	})
}
