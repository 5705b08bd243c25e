package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/roomcast/roomcast/replay/wire"
)

// Admin commands: stats, rooms, drain, shed. They call the admin listener
// (--admin-url) with the admin token.

func statsCommand() *command {
	return &command{
		name:    "stats",
		summary: "show a pod's state: streams, rooms, traffic, drops, backend (GET /admin/stats)",
		detail: `
Prints a summary of GET /admin/stats; --json prints the answer as the pod sent it.`,
		examples: `  roomcastctl stats
  roomcastctl --admin-url http://10.0.0.7:9090 --admin-token-file /etc/roomcast/admin-token stats
  roomcastctl stats --json | jq .connections`,
		run: func(ctx context.Context, c *cli, args []string) error {
			if len(args) != 0 {
				return usagef("stats takes no arguments")
			}
			raw, err := c.admin(ctx, http.MethodGet, "/admin/stats")
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			return c.printStats(raw)
		},
	}
}

// stats is the part of /admin/stats the summary shows; the JSON has more.
type stats struct {
	State              string            `json:"state"`
	Accepting          bool              `json:"accepting"`
	Connections        int64             `json:"connections"`
	MultiplexedStreams int64             `json:"multiplexed_streams"`
	Rooms              int64             `json:"rooms"`
	Subscriptions      int64             `json:"subscriptions"`
	Published          uint64            `json:"published"`
	Delivered          uint64            `json:"delivered"`
	Drops              map[string]uint64 `json:"drops"`
	QueuedBytes        int64             `json:"queued_bytes"`
	Repairs            uint64            `json:"repairs"`
	Resyncs            uint64            `json:"resyncs"`
	ConnectsPerSecond  float64           `json:"connects_per_second"`
	ResumesPerSecond   float64           `json:"resumes_per_second"`
	UptimeSeconds      float64           `json:"uptime_seconds"`
	Drain              struct {
		Closed         int64   `json:"closed"`
		ElapsedSeconds float64 `json:"elapsed_seconds"`
	} `json:"drain"`
	Backend struct {
		Kind      string `json:"kind"`
		Up        bool   `json:"up"`
		ChangedAt string `json:"changed_at"`
	} `json:"backend"`
	Access struct {
		Mode          string `json:"mode"`
		Users         int    `json:"users"`
		TicketsIssued uint64 `json:"tickets_issued"`
	} `json:"access"`
}

func (c *cli) printStats(raw []byte) error {
	var s stats
	if err := json.Unmarshal(raw, &s); err != nil {
		return errors.New("the answer is not the stats JSON")
	}
	accepting := "accepting streams"
	if !s.Accepting {
		accepting = "not accepting streams"
	}
	backend := "down"
	if s.Backend.Up {
		backend = "up"
	}
	drops := make([]string, 0, len(s.Drops))
	for k, v := range s.Drops {
		drops = append(drops, fmt.Sprintf("%s %d", printable(k, 64), v))
	}
	sort.Strings(drops)
	w := tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "state\t%s (%s)\n", printable(s.State, 32), accepting)
	fmt.Fprintf(w, "uptime\t%s\n", (time.Duration(s.UptimeSeconds) * time.Second).String())
	fmt.Fprintf(w, "connections\t%d (multiplexed %d)\n", s.Connections, s.MultiplexedStreams)
	fmt.Fprintf(w, "rooms\t%d (bus subscriptions %d)\n", s.Rooms, s.Subscriptions)
	fmt.Fprintf(w, "connects/s\t%.2f (resuming %.2f)\n", s.ConnectsPerSecond, s.ResumesPerSecond)
	fmt.Fprintf(w, "published\t%d\n", s.Published)
	fmt.Fprintf(w, "delivered\t%d\n", s.Delivered)
	fmt.Fprintf(w, "queued bytes\t%d\n", s.QueuedBytes)
	fmt.Fprintf(w, "drops\t%s\n", strings.Join(drops, ", "))
	fmt.Fprintf(w, "repairs\t%d (resyncs %d)\n", s.Repairs, s.Resyncs)
	fmt.Fprintf(w, "backend\t%s %s since %s\n", printable(s.Backend.Kind, 32), backend, printable(s.Backend.ChangedAt, 40))
	fmt.Fprintf(w, "drain\t%s closed in %.1fs\n", count(s.Drain.Closed, "stream", "streams"), s.Drain.ElapsedSeconds)
	fmt.Fprintf(w, "access\t%s (users %d, tickets issued %d)\n", printable(s.Access.Mode, 16), s.Access.Users, s.Access.TicketsIssued)
	return w.Flush()
}

type roomsOptions struct {
	prefix string
	limit  int
}

func roomsCommand() *command {
	var o roomsOptions
	return &command{
		name:    "rooms",
		args:    "[ROOM]",
		summary: "list a pod's rooms by local members, or show one room across the fleet",
		detail: `
Without ROOM: GET /admin/rooms, the rooms with local members on this pod, most members
first (--prefix filters by name, --limit 1 to 1000, the pod's default 50). With ROOM:
GET /admin/rooms/ROOM, the room's local members, bus subscription, epoch and head,
queue depth percentiles, and which pods of the fleet hold it with how many members.`,
		examples: `  roomcastctl rooms
  roomcastctl rooms --prefix team-7. --limit 10
  roomcastctl rooms chat-42
  roomcastctl rooms chat-42 --json | jq '.fleet[] | .pod'`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.prefix, "prefix", "", "only rooms whose name starts with `P`")
			fs.IntVar(&o.limit, "limit", 0, "at most `N` rooms, 1 to 1000 (0: the pod's default, 50)")
		},
		run: func(ctx context.Context, c *cli, args []string) error {
			switch len(args) {
			case 0:
				return c.roomList(ctx, o)
			case 1:
				if o.prefix != "" || o.limit != 0 {
					return usagef("--prefix and --limit list rooms; they do not go with ROOM")
				}
				return c.room(ctx, args[0])
			}
			return usagef("rooms takes at most one ROOM")
		},
	}
}

// roomList is GET /admin/rooms's answer.
type roomList struct {
	Pod   string `json:"pod"`
	Rooms []struct {
		Room    string `json:"room"`
		Members int64  `json:"members"`
	} `json:"rooms"`
	Total     int64 `json:"total"`
	Truncated bool  `json:"truncated"`
}

func (c *cli) roomList(ctx context.Context, o roomsOptions) error {
	q := url.Values{}
	if o.prefix != "" {
		q.Set("prefix", o.prefix)
	}
	if o.limit != 0 {
		q.Set("limit", strconv.Itoa(o.limit))
	}
	path := "/admin/rooms"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	raw, err := c.admin(ctx, http.MethodGet, path)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	var l roomList
	if err := json.Unmarshal(raw, &l); err != nil {
		return errors.New("the answer is not the room list JSON")
	}
	more := ""
	if l.Truncated {
		more = fmt.Sprintf(", the first %d shown", len(l.Rooms))
	}
	c.printf("pod %s: %s with local members%s\n", printable(l.Pod, 256), count(l.Total, "room", "rooms"), more)
	if len(l.Rooms) == 0 {
		return nil
	}
	c.printf("%9s  %s\n", "MEMBERS", "ROOM")
	for _, r := range l.Rooms {
		c.printf("%9d  %s\n", r.Members, printable(r.Room, 140))
	}
	return nil
}

// roomDetail is GET /admin/rooms/{room}'s answer. Epoch, head and the times are
// printed as they come, whatever JSON type the pod uses for them.
type roomDetail struct {
	Room         string          `json:"room"`
	Pod          string          `json:"pod"`
	Members      int64           `json:"members"`
	Subscription string          `json:"subscription"`
	Epoch        json.RawMessage `json:"epoch"`
	Head         json.RawMessage `json:"head"`
	QueueDepth   struct {
		P50 float64 `json:"p50"`
		P90 float64 `json:"p90"`
		P99 float64 `json:"p99"`
		Max float64 `json:"max"`
	} `json:"queue_depth"`
	Fleet []struct {
		Pod       string          `json:"pod"`
		Members   int64           `json:"members"`
		UpdatedAt json.RawMessage `json:"updated_at"`
	} `json:"fleet"`
	FleetMembers int64 `json:"fleet_members"`
}

func (c *cli) room(ctx context.Context, room string) error {
	if !wire.ValidRoom(room) {
		return usagef("invalid room name %q: 1 to 128 characters of A-Z a-z 0-9 . _ ~ -", printable(room, 140))
	}
	raw, err := c.admin(ctx, http.MethodGet, "/admin/rooms/"+url.PathEscape(room))
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	var d roomDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return errors.New("the answer is not the room JSON")
	}
	w := tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "room\t%s\n", printable(d.Room, 140))
	fmt.Fprintf(w, "pod\t%s\n", printable(d.Pod, 256))
	fmt.Fprintf(w, "members\t%d here, %d in the fleet\n", d.Members, d.FleetMembers)
	fmt.Fprintf(w, "subscription\t%s\n", printable(d.Subscription, 32))
	fmt.Fprintf(w, "epoch\t%s\n", rawText(d.Epoch))
	fmt.Fprintf(w, "head\t%s\n", rawText(d.Head))
	fmt.Fprintf(w, "queue depth\tp50 %g  p90 %g  p99 %g  max %g\n", d.QueueDepth.P50, d.QueueDepth.P90, d.QueueDepth.P99, d.QueueDepth.Max)
	if err := w.Flush(); err != nil {
		return err
	}
	if len(d.Fleet) == 0 {
		c.printf("fleet: no pod holds the room\n")
		return nil
	}
	c.printf("fleet:\n")
	w = tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "  POD\tMEMBERS\tUPDATED\n")
	for _, p := range d.Fleet {
		fmt.Fprintf(w, "  %s\t%d\t%s\n", printable(p.Pod, 256), p.Members, rawText(p.UpdatedAt))
	}
	return w.Flush()
}

// rawText prints a JSON scalar for people: a string without its quotes, anything
// else as it is; "-" when absent.
func rawText(raw json.RawMessage) string {
	var s string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "-"
	case json.Unmarshal(raw, &s) == nil:
		return printable(s, 256)
	}
	return printable(string(raw), 256)
}

func drainCommand() *command {
	return &command{
		name:    "drain",
		summary: "start a pod's drain (POST /admin/drain); the pod exits when it is done",
		detail: `
The pod turns unready at once, keeps serving for its drain delay, then closes its
streams in batches over its drain window (each client resumes on another pod) and
exits. Asking again is harmless. Prints the pod's drain state.`,
		examples: `  roomcastctl --admin-url http://10.0.0.7:9090 drain
  kubectl port-forward pod/roomcast-0 9090 & roomcastctl drain --json`,
		run: func(ctx context.Context, c *cli, args []string) error {
			if len(args) != 0 {
				return usagef("drain takes no arguments")
			}
			raw, err := c.admin(ctx, http.MethodPost, "/admin/drain")
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var a struct {
				State string `json:"state"`
			}
			if json.Unmarshal(raw, &a) != nil {
				return errors.New("the answer is not {\"state\"}")
			}
			c.printf("drain started: the pod is %s\n", printable(a.State, 32))
			return nil
		},
	}
}

func shedCommand() *command {
	return &command{
		name:    "shed",
		args:    "N",
		summary: "close N of a pod's streams, each with a retry hint (POST /admin/shed)",
		detail: `
Moves clients to other pods after a scale-out without draining this one: each closed
stream gets a jittered retry: and resumes by id wherever the load balancer sends it.
Prints how many streams were closed.`,
		examples: `  roomcastctl shed 500
  roomcastctl --admin-url http://10.0.0.7:9090 shed 100 --json`,
		run: func(ctx context.Context, c *cli, args []string) error {
			if len(args) != 1 {
				return usagef("shed takes one N, the number of streams to close")
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 0 {
				return usagef("N must be a non-negative integer")
			}
			raw, err := c.admin(ctx, http.MethodPost, "/admin/shed?count="+strconv.Itoa(n))
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(raw)
			}
			var a struct {
				Closed int64 `json:"closed"`
			}
			if json.Unmarshal(raw, &a) != nil {
				return errors.New("the answer is not {\"closed\"}")
			}
			c.printf("closed %s\n", count(a.Closed, "stream", "streams"))
			return nil
		},
	}
}

// count is n with the noun in the form n takes: "1 room", "0 rooms", "2 rooms".
func count(n int64, one, many string) string {
	if n == 1 || n == -1 {
		return strconv.FormatInt(n, 10) + " " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}
