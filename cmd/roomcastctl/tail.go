package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
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
(history the stream cannot go on from) is printed and ends tail with exit code 1
unless --follow-resync; a reauth (the credential ended) is reported on stderr, and
the reconnect that follows fails with 401 if the credential is no longer valid.
--token is sent as the bearer credential.`,
		examples: `  roomcastctl tail chat-42
  roomcastctl tail chat-42 --from k3x9q:41 --json | jq .body
  roomcastctl tail orders --type created --count 1     # wait for one event, then exit
  ROOMCASTCTL_TOKEN=$JWT roomcastctl --url https://rt.example.com tail team-7.feed`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.from, "from", "", "resume after this `ID` (<epoch>:<seq> or <seq>), sent as Last-Event-ID")
			fs.StringVar(&o.typ, "type", "", "print only events of this `TYPE` (resync and reauth are always shown)")
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
	return "resync at " + e.id + ": the stream could not go on from where it was (history trimmed, lost, or of another epoch); use --follow-resync to go on"
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
	f := &follower{
		url:       c.url + "/rooms/" + url.PathEscape(room) + "/events",
		header:    header,
		from:      o.from,
		transport: c.transport,
		idle:      o.idle,
		handle: func(ev streamEvent) error {
			switch ev.Type {
			case "resync":
				c.printEvent(room, ev)
				if !o.followResync {
					return &resyncError{id: printable(ev.ID, 300)}
				}
				fmt.Fprintf(c.io.err, "roomcastctl tail: resync at %s: history before it is lost; following on\n", printable(ev.ID, 300))
				return nil
			case "reauth":
				c.printEvent(room, ev)
				fmt.Fprintf(c.io.err, "roomcastctl tail: the credential ended (reauth); reconnecting\n")
				return nil
			}
			if o.typ != "" && ev.Type != o.typ {
				return nil
			}
			c.printEvent(room, ev)
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
			fmt.Fprintf(c.io.err, "roomcastctl tail: %s; reconnecting in %s\n", why, wait.Round(time.Millisecond))
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
// notices (resync, reauth) their whole data; data that is not JSON as a string.
func (c *cli) printEvent(room string, ev streamEvent) {
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
	c.printf("%s %s %s\n", printable(ev.ID, 300), printable(ev.Type, 64), body)
}
