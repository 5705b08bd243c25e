package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"strings"
	"time"
)

// rooms is a repeatable flag.
type roomsFlag []string

func (r *roomsFlag) String() string { return strings.Join(*r, ",") }
func (r *roomsFlag) Set(v string) error {
	*r = append(*r, v)
	return nil
}

type ticketOptions struct {
	sub      string
	rooms    roomsFlag
	validFor time.Duration
}

func ticketCommand() *command {
	var o ticketOptions
	return &command{
		name:    "ticket",
		summary: "issue a single-use ticket for a browser's EventSource (POST /tickets)",
		detail: `
Asks the public listener for a ticket for user --sub, granted the rooms given with
--room (names, or prefixes ending in *), with the publish credential (--token), which
must cover every grant; a JWT asks only for its own sub, and its ticket never outlives
it. The browser opens /rooms/ROOM/events?ticket=TICKET once, before the ticket
expires. --valid-for sets the credential's exp: streams opened with the ticket end
with a reauth then. Prints the ticket and its expiry; --json prints the
answer {"ticket","expiresAt"}.`,
		examples: `  roomcastctl ticket --sub user-17 --room chat-42
  roomcastctl ticket --sub user-17 --room 'team-7.*' --room news --valid-for 1h --json`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.sub, "sub", "", "the `USER` the ticket is for")
			fs.Var(&o.rooms, "room", "a `ROOM` or prefix* the ticket grants; repeatable")
			fs.DurationVar(&o.validFor, "valid-for", 0, "streams opened with the ticket end this long from now (0: no exp)")
		},
		run: func(ctx context.Context, c *cli, args []string) error { return c.ticket(ctx, args, o) },
	}
}

type ticketRequest struct {
	Sub       string   `json:"sub"`
	Subscribe []string `json:"subscribe"`
	Exp       int64    `json:"exp,omitempty"`
}

func (c *cli) ticket(ctx context.Context, args []string, o ticketOptions) error {
	switch {
	case len(args) != 0:
		return usagef("ticket takes no arguments: use --sub and --room")
	case o.sub == "":
		return usagef("--sub is required")
	case len(o.rooms) == 0:
		return usagef("--room is required (repeat it for more rooms)")
	case o.validFor < 0:
		return usagef("--valid-for must not be negative")
	}
	req := ticketRequest{Sub: o.sub, Subscribe: o.rooms}
	if o.validFor > 0 {
		req.Exp = time.Now().Add(o.validFor).Unix()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, request{method: http.MethodPost, url: c.url + "/tickets", token: c.token,
		header: http.Header{"Content-Type": {"application/json"}}, body: body})
	var se *serverError
	if errors.As(err, &se) && se.Status == http.StatusUnauthorized && c.token == "" {
		// The gateway answers for its publish credential; say what a ticket needs.
		return &serverError{Status: se.Status, Code: se.Code, Message: "a ticket is issued only on a credential that covers its rooms: " +
			"pass the publish token (or the user's JWT) with --token-file, ROOMCASTCTL_TOKEN or --token"}
	}
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	var t struct {
		Ticket    string `json:"ticket"`
		ExpiresAt string `json:"expiresAt"`
	}
	if json.Unmarshal(raw, &t) != nil || t.Ticket == "" {
		return errors.New("the answer is not {\"ticket\",\"expiresAt\"}")
	}
	c.printf("%s\t(redeem once before %s)\n", printable(t.Ticket, 512), printable(t.ExpiresAt, 40))
	return nil
}
