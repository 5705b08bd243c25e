package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/roomcast/roomcast/gateway/gatewaytest/wsclient"
	"github.com/roomcast/roomcast/replay/wire"
)

// wsOptions are ws's own flags.
type wsOptions struct {
	client       string
	followResync bool
	count        int
}

func wsCommand() *command {
	var o wsOptions
	return &command{
		name:    "ws",
		args:    "ROOM[=ID]...",
		summary: "follow rooms over one WebSocket connection, acknowledging each event",
		detail: `
Holds one WebSocket connection (GET /ws) for every ROOM, each from the id after =
(none: from now). Prints each event with its room ("<room> <id> <type> <body>";
--json: {"room","id","type","body"}) and acknowledges it. When the server closes the
connection for a drain, a slow consumer or a shutdown (1012, 1013, 1001) or the
connection breaks, it connects again with the same client id and boot and resumes
every room from its last id. Another connection of the same client id taking over
(4409) ends it with exit code 1, as does a bad hello, a refused credential or grant,
and a resync unless --follow-resync. --token is sent as the bearer credential.
The client id defaults to roomcastctl.<host>.<pid>, one per process, so that two
ws running side by side do not take the connection from each other; it is
anon:roomcastctl.<host>.<pid> without --token: a gateway with JWT keys lets a
connection without a credential claim only anon: ids.`,
		examples: `  roomcastctl ws orders alerts
  roomcastctl ws orders=k3x9q:41 --client rig-0414 --json | jq .body
  roomcastctl ws orders --count 1     # wait for one event, then exit`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.client, "client", "", "the client `ID` that owns the connection across the fleet (default roomcastctl.<host>.<pid>; anon:roomcastctl.<host>.<pid> without --token)")
			fs.BoolVar(&o.followResync, "follow-resync", false, "keep following after a resync instead of exiting 1")
			fs.IntVar(&o.count, "count", 0, "exit 0 after printing `N` events (0: follow until interrupted)")
		},
		run: func(ctx context.Context, c *cli, args []string) error { return c.ws(ctx, args, o) },
	}
}

// defaultClient is the client id of a ws without --client: roomcastctl.<host>.<pid>,
// in the anonymous namespace (anon:) when it has no credential. The process id makes
// it one per process: two ws side by side would otherwise claim the same id and each
// take the connection from the other; the reconnects of one process keep it.
func defaultClient(credential bool) string {
	host, _ := os.Hostname()
	id := "roomcastctl." + sanitizeClient(host) + "." + strconv.Itoa(os.Getpid())
	if !credential {
		id = "anon:" + id
	}
	return id
}

// sanitizeClient keeps the characters a client id may hold.
func sanitizeClient(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && (r == '.' || r == '_' || r == '-' || r == '~' || r == ':' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			b.WriteRune(r)
		}
		if b.Len() >= 100 {
			break
		}
	}
	if b.Len() == 0 {
		return "host"
	}
	return b.String()
}

// wsClosed is a connection the server closed for good (not a drain or a slow
// consumer): exit code 1.
type wsClosed struct {
	code   websocket.StatusCode
	reason string
}

func (e *wsClosed) Error() string {
	return fmt.Sprintf("the server closed the connection with %d: %s", int(e.code), printable(e.reason, 200))
}

func (c *cli) ws(ctx context.Context, args []string, o wsOptions) error {
	if len(args) == 0 {
		return usagef("ws takes at least one ROOM")
	}
	if o.client == "" {
		o.client = defaultClient(c.token != "")
	}
	if !wire.ValidClient(o.client) {
		return usagef("--client: 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -")
	}
	if o.count < 0 {
		return usagef("--count must not be negative")
	}
	from := make(map[string]string, len(args))
	for _, a := range args {
		room, id, _ := strings.Cut(a, "=")
		if !wire.ValidRoom(room) {
			return usagef("invalid room name %q: 1 to 128 characters of A-Z a-z 0-9 . _ ~ -", printable(room, 140))
		}
		if id != "" && !headerSafe(id, 256) {
			return usagef("%s: an id is <epoch>:<seq> or <seq>", printable(room, 140))
		}
		from[room] = id
	}
	target := wsTarget(c.url, args[0])
	boot := wire.NewBoot(time.Now())
	printed := 0
	const minWait, maxWait = 500 * time.Millisecond, 30 * time.Second
	wait := minWait
	for attempt := 0; ; attempt++ {
		delivered, err := c.wsOnce(ctx, target, o, boot, from, &printed)
		var closed *wsClosed
		switch {
		case err == nil || errors.Is(err, errStop):
			return nil
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &closed), errors.As(err, new(*resyncError)), errors.As(err, new(*refusedError)):
			return err
		case attempt == 0 && !delivered && errors.As(err, new(*unreachableError)):
			return err
		}
		if delivered {
			wait = minWait // a connection that worked resets the backoff
		}
		d := wait/2 + rand.N(wait/2+1)
		fmt.Fprintf(c.io.err, "roomcastctl ws: %s; reconnecting in %s\n", printable(err.Error(), 300), d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		wait = min(2*wait, maxWait)
	}
}

// wsOnce holds one connection until it ends; from follows every room's last id.
// delivered reports whether the connection got as far as the welcome.
func (c *cli) wsOnce(ctx context.Context, target string, o wsOptions, boot string, from map[string]string, printed *int) (delivered bool, err error) {
	header := http.Header{}
	if c.token != "" {
		header.Set("Authorization", "Bearer "+c.token)
	}
	dctx, cancel := context.WithTimeout(ctx, c.timeout)
	conn, resp, err := wsclient.Dial(dctx, target, wsclient.Options{HTTPClient: &http.Client{Transport: c.transport}, Header: header, ReadLimit: 16 << 20, Agent: agent()})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			se := readError(resp)
			if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
				return false, se // retried: a draining or busy pod
			}
			return false, &refusedError{se}
		}
		return false, &unreachableError{err: err}
	}
	defer conn.CloseNow()
	if err := conn.Hello(ctx, o.client, boot, from); err != nil {
		return false, err
	}
	for {
		data, _, err := conn.ReadRaw(ctx)
		if err != nil {
			code, reason := wsclient.CloseOf(err)
			if wsclient.Retryable(code) {
				return delivered, fmt.Errorf("the connection ended (%d)", int(code))
			}
			return delivered, &wsClosed{code: code, reason: reason}
		}
		f, err := wsclient.Decode(data)
		if err != nil {
			continue
		}
		switch f.Kind {
		case wsclient.KindWelcome:
			delivered = true
		case wsclient.KindEvent, wsclient.KindExpired:
			typ := f.Type
			if f.Kind == wsclient.KindExpired {
				typ = expiredType
			}
			c.printEvent(f.Room, true, streamEvent{ID: f.ID, Type: typ, Data: data})
			from[f.Room] = f.ID
			if err := conn.Ack(ctx, f.Room, f.ID); err != nil {
				return delivered, err
			}
			if *printed++; o.count > 0 && *printed >= o.count {
				_ = conn.Close(websocket.StatusNormalClosure, "done")
				return delivered, errStop
			}
		case wsclient.KindResync:
			c.printEvent(f.Room, true, streamEvent{ID: f.ID, Type: "resync", Data: data})
			from[f.Room] = f.ID
			if !o.followResync {
				return delivered, &resyncError{id: printable(f.ID, 300)}
			}
		case wsclient.KindError:
			fmt.Fprintf(c.io.err, "roomcastctl ws: %s: %s\n", printable(f.Error, 64), printable(f.Message, 300))
		}
	}
}

// refusedError is a WebSocket handshake the server answered with a 4xx: not
// retried, exit code 1.
type refusedError struct{ *serverError }

// agent is the version roomcastctl names in its hello: roomcastctl/<module version>.
func agent() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	a := "roomcastctl/" + v
	if len(a) > 64 {
		a = a[:64]
	}
	return a
}

// wsTarget is the WebSocket URL of the gateway at base for a connection whose first
// ROOM argument is first (room or room=id): the room rides in the URL's query,
// where a router that hashes rooms finds it (deploy/nginx.conf: /ws?room=); the
// gateway itself ignores it.
func wsTarget(base, first string) string {
	room, _, _ := strings.Cut(first, "=")
	return wsclient.URL(base) + "?room=" + url.QueryEscape(room)
}
