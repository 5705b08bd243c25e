package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/roomcast/roomcast/replay/wire"
)

// tailOptions are tail's own flags.
type tailOptions struct {
	from         string
	typ          string
	followResync bool
	count        int
	idle         time.Duration
}

func tailCommand() *command {
	var o tailOptions
	return &command{
		name:    "tail",
		args:    "ROOM",
		summary: "follow a room's events, reconnecting and resuming by id",
		detail: `
Prints each event as "<id> <type> <body>" (--json: one {"room","id","type","body"}
object per line). The stream reconnects when the server ends it (a drain, a shed)
or the connection breaks, resumes from the last id it saw, waits the server's
retry: hint and backs off while connections fail; a stream silent for
--idle-timeout (no event, no heartbeat) is taken as a dead connection. A resync
(history the stream cannot go on from, as after an embedded gateway restarted) is
printed and ends tail with exit code 1 unless --follow-resync; a reauth (the
credential ended) is reported on stderr, and the reconnect that follows fails with
401 if the credential is no longer valid. On stderr tail also says when it is
connected and from which position (resuming after an id, or from now), states what
a resync will do, and prints what the server says in comment lines (why it ended a
stream: "the event log (redis at ...) is unreachable"), its heartbeats aside.
--token is sent as the bearer credential.`,
		examples: `  roomcastctl tail chat-42
  roomcastctl tail chat-42 --from k3x9q:41 --json | jq .body
  roomcastctl tail orders --type created --count 1     # wait for one event, then exit
  ROOMCASTCTL_TOKEN=$JWT roomcastctl --url https://rt.example.com tail team-7.feed`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.from, "from", "", "resume after this `ID` (<epoch>:<seq> or <seq>), sent as Last-Event-ID")
			fs.StringVar(&o.typ, "type", "", "print only events of this `TYPE` (resync, reauth and expired are always shown)")
			fs.BoolVar(&o.followResync, "follow-resync", false, "keep following after a resync instead of exiting 1")
			fs.IntVar(&o.count, "count", 0, "exit 0 after printing `N` events (0: follow until interrupted)")
			fs.DurationVar(&o.idle, "idle-timeout", idleTimeout, "reconnect when the stream sends nothing, not even a heartbeat, for this long")
		},
		run: func(ctx context.Context, c *cli, args []string) error { return c.tail(ctx, args, o) },
	}
}

// resyncError ends tail after a resync: exit code 1.
type resyncError struct{ id string }

func (e *resyncError) Error() string {
	return "resync at " + e.id + ": the stream cannot go on without a gap (the history it followed was trimmed, or lost: an embedded gateway loses it when it restarts); --follow-resync keeps following past a resync"
}

func (c *cli) tail(ctx context.Context, args []string, o tailOptions) error {
	if len(args) != 1 {
		return usagef("tail takes one ROOM")
	}
	room := args[0]
	if !wire.ValidRoom(room) {
		return usagef("invalid room name %q: 1 to 128 characters of A-Z a-z 0-9 . _ ~ -", printable(room, 140))
	}
	if o.from != "" && !headerSafe(o.from, 256) {
		return usagef("--from: an id is <epoch>:<seq> or <seq>")
	}
	if o.count < 0 {
		return usagef("--count must not be negative")
	}
	if o.idle <= 0 {
		return usagef("--idle-timeout must be positive")
	}
	header := map[string]string{}
	if c.token != "" {
		header["Authorization"] = "Bearer " + c.token
	}
	printed := 0
	// Standard error hears from the goroutine that reads the stream (the server's
	// comments) as well as from this one.
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(c.io.err, "roomcastctl tail: "+format+"\n", a...)
	}
	policy := "a resync (the room's history lost or trimmed, as when an embedded gateway restarts) ends tail with exit code 1; --follow-resync keeps following"
	if o.followResync {
		policy = "a resync (the room's history lost or trimmed) is printed and tail follows on (--follow-resync)"
	}
	connects := 0
	fromNow := false // the connection started without a resume point: its anchor says where
	// announce says that a connection started, and where; after the first, tail's
	// policy on a resync.
	announce := func(where string) {
		if connects > 1 {
			say("reconnected, %s", where)
			return
		}
		say("connected to %s at %s, %s", room, printable(c.url, 200), where)
		say("%s", policy)
	}
	f := &follower{
		url:       c.url + "/rooms/" + url.PathEscape(room) + "/events",
		header:    header,
		from:      o.from,
		transport: c.transport,
		idle:      o.idle,
		handle: func(ev streamEvent) error {
			switch ev.Type {
			case "resync":
				c.printEvent(room, false, ev)
				if !o.followResync {
					return &resyncError{id: printable(ev.ID, 300)}
				}
				say("resync at %s: history before it is lost; following on", printable(ev.ID, 300))
				return nil
			case "reauth":
				c.printEvent(room, false, ev)
				say("the credential ended (reauth); reconnecting")
				return nil
			}
			if fromNow {
				fromNow = false
				announce("following from now")
			}
			if o.typ != "" && ev.Type != o.typ && ev.Type != expiredType {
				return nil
			}
			c.printEvent(room, false, ev)
			if printed++; o.count > 0 && printed >= o.count {
				return errStop
			}
			return nil
		},
		waiting: func(wait time.Duration, cause error) {
			why := "the stream ended"
			if cause != nil {
				why = printable(cause.Error(), 300)
			}
			say("%s; reconnecting in %s", why, wait.Round(time.Millisecond))
		},
		connected: func(after string) {
			connects++
			fromNow = after == ""
			if !fromNow {
				announce("resuming after " + printable(after, 300))
			}
		},
		anchored: func(id string) {
			if fromNow {
				fromNow = false
				announce("following from now (after " + printable(id, 300) + ")")
			}
		},
		comment: func(text string) {
			if text != "hb" { // the gateway's heartbeat
				say("the server says: %s", printable(text, 300))
			}
		},
	}
	if err := f.run(ctx); err != nil {
		return err
	}
	return nil
}

// envelope is the part of an event's data tail prints.
type envelope struct {
	Body json.RawMessage `json:"body"`
}

// tailLine is tail's --json output.
type tailLine struct {
	Room string          `json:"room"`
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

// printEvent prints one event: its envelope's body, or for the gateway's own
// notices (resync, reauth) their whole data; data that is not JSON as a string. An
// expired marker says so in place of a body (with --json, its body is null). The
// line starts with the room when withRoom (ws follows several); --json always holds
// it.
func (c *cli) printEvent(room string, withRoom bool, ev streamEvent) {
	if ev.Type == expiredType {
		c.printExpired(room, withRoom, ev.ID)
		return
	}
	body := json.RawMessage(nil)
	if json.Valid(ev.Data) {
		body = ev.Data
		var env envelope
		if ev.Type != "resync" && ev.Type != "reauth" && json.Unmarshal(ev.Data, &env) == nil && env.Body != nil {
			body = env.Body
		}
		var b bytes.Buffer
		if json.Compact(&b, body) == nil {
			body = b.Bytes()
		}
	} else {
		body = json.RawMessage(strconv.Quote(string(ev.Data)))
	}
	if c.json {
		line, _ := json.Marshal(tailLine{Room: room, ID: ev.ID, Type: ev.Type, Body: body})
		c.printf("%s\n", line)
		return
	}
	prefix := ""
	if withRoom {
		prefix = printable(room, 140) + " "
	}
	c.printf("%s%s %s %s\n", prefix, printable(ev.ID, 300), printable(ev.Type, 64), body)
}

// printExpired prints an expired marker: the event at id outlived its time to live
// before it was delivered.
func (c *cli) printExpired(room string, withRoom bool, id string) {
	if c.json {
		line, _ := json.Marshal(tailLine{Room: room, ID: id, Type: expiredType, Body: json.RawMessage("null")})
		c.printf("%s\n", line)
		return
	}
	prefix := ""
	if withRoom {
		prefix = printable(room, 140) + " "
	}
	c.printf("%s%s expired (its time to live passed before it was delivered: no body)\n", prefix, printable(id, 300))
}
