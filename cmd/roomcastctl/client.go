package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/roomcast/roomcast/replay/wire"
)

// The client command: a WebSocket client's connection, shown or closed by an
// operator (GET and POST /admin/clients/ID).

type clientOptions struct {
	close bool
	mode  string
}

func clientCommand() *command {
	var o clientOptions
	return &command{
		name:    "client",
		args:    "ID",
		summary: "show a WebSocket client's connection, or close it (/admin/clients/ID)",
		detail: `
Without --close: GET /admin/clients/ID, where the client is connected (pod, session,
since when) and, on the pod that holds it, its agent, rooms, deliveries and acks.
With --close: POST /admin/clients/ID/close?mode=M, on whichever pod holds it. --mode
reconnect closes with 1012 (the client reconnects and resumes, as after a drain);
--mode kick (the default) closes with 4409, which the client takes as final.`,
		examples: `  roomcastctl client rig-0414
  roomcastctl client rig-0414 --close --mode reconnect
  roomcastctl client rig-0414 --close --json`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&o.close, "close", false, "close the client's connection")
			fs.StringVar(&o.mode, "mode", "", "with --close: `reconnect` (1012, the client comes back) or kick (4409, final; the default)")
		},
		run: func(ctx context.Context, c *cli, args []string) error {
			if len(args) != 1 {
				return usagef("client takes one ID")
			}
			id := args[0]
			if !wire.ValidClient(id) {
				return usagef("ID: 1 to 128 characters of A-Z a-z 0-9 . _ ~ : -")
			}
			switch o.mode {
			case "", "kick", "reconnect":
			default:
				return usagef("--mode is reconnect or kick")
			}
			if o.mode != "" && !o.close {
				return usagef("--mode goes with --close")
			}
			if o.close {
				return c.closeClient(ctx, id, o.mode)
			}
			return c.showClient(ctx, id)
		},
	}
}

func (c *cli) closeClient(ctx context.Context, id, mode string) error {
	path := "/admin/clients/" + url.PathEscape(id) + "/close"
	if mode != "" {
		path += "?mode=" + mode
	}
	raw, err := c.admin(ctx, http.MethodPost, path)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	var a struct {
		Pod    string `json:"pod"`
		Closed string `json:"closed"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return errors.New("the answer is not {\"client\",\"pod\",\"closed\"}")
	}
	if mode == "" {
		mode = "kick"
	}
	if a.Closed == "here" {
		c.printf("closed %s (%s) on pod %s\n", id, mode, printable(a.Pod, 64))
		return nil
	}
	c.printf("asked pod %s to close %s (%s)\n", printable(a.Pod, 64), id, mode)
	return nil
}

func (c *cli) showClient(ctx context.Context, id string) error {
	raw, err := c.admin(ctx, http.MethodGet, "/admin/clients/"+url.PathEscape(id))
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	var b struct {
		Pod            string `json:"pod"`
		Session        string `json:"session"`
		Identity       string `json:"identity"`
		Agent          string `json:"agent"`
		Local          bool   `json:"local"`
		ConnectedSince string `json:"connected_since"`
		Unacknowledged int64  `json:"unacknowledged"`
		Rooms          map[string]struct {
			Delivered string `json:"delivered"`
		} `json:"rooms"`
	}
	if json.Unmarshal(raw, &b) != nil {
		return errors.New("the answer is not the client JSON")
	}
	w := tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "pod\t%s\n", printable(b.Pod, 64))
	fmt.Fprintf(w, "session\t%s\n", printable(b.Session, 64))
	fmt.Fprintf(w, "identity\t%s\n", printable(b.Identity, 300))
	fmt.Fprintf(w, "since\t%s\n", printable(b.ConnectedSince, 40))
	if b.Local {
		agent := b.Agent
		if agent == "" {
			agent = "-"
		}
		fmt.Fprintf(w, "agent\t%s\n", printable(agent, 64))
		fmt.Fprintf(w, "rooms\t%d (unacknowledged %d)\n", len(b.Rooms), b.Unacknowledged)
	}
	return w.Flush()
}
