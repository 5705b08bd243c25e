package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/roomcast/roomcast/replay/wire"
)

// maxPublishBody bounds what publish reads from its argument or stdin; the server
// has its own, smaller limit (--max-body, 64 KiB by default) and answers 413 past it.
const maxPublishBody = 16 << 20

type publishOptions struct {
	typ         string
	idemKey     string
	contentType string
	ttl         string
}

func publishCommand() *command {
	var o publishOptions
	return &command{
		name:    "publish",
		args:    "ROOM [BODY|-]",
		summary: "publish one event to a room and print its id",
		detail: `
BODY is the event's body; "-" or no BODY reads it from stdin. --content-type json
sends it as application/json (it becomes the body as is), text as text/plain (it
becomes a JSON string); auto, the default, sends JSON when BODY is valid JSON and
text otherwise. --token is the publish credential (with none configured on the
gateway, only loopback clients may publish). A retried publish with the same
--idempotency-key within its TTL returns the first one's id and publishes nothing new.
--ttl gives the event a time to live (sent as Event-TTL: a duration such as 30s or
5m, or whole seconds, at most the gateway's --history-ttl): once it has passed,
subscribers get an expired marker in its place, never the event.
Prints the assigned id; --json prints the answer {"room","epoch","seq","id"}.`,
		examples: `  roomcastctl publish chat-42 '{"text":"hello"}'
  roomcastctl publish chat-42 --type typing --content-type text 'ada is typing'
  echo '{"total":12}' | roomcastctl publish orders --idempotency-key order-991 -
  roomcastctl publish rig-0414 --type command --ttl 5m '"reboot"'
  ROOMCASTCTL_TOKEN=$PUBLISH_TOKEN roomcastctl --url https://rt.example.com publish news '{"v":1}' --json`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.typ, "type", "", "event `TYPE` (sent as Event-Type; default message)")
			fs.StringVar(&o.idemKey, "idempotency-key", "", "`KEY` that makes a retried publish return the first one's id")
			fs.StringVar(&o.contentType, "content-type", "auto", "json, text or auto")
			fs.StringVar(&o.ttl, "ttl", "", "the event's time to live, `TTL` (sent as Event-TTL: 30s, 5m or whole seconds)")
		},
		run: func(ctx context.Context, c *cli, args []string) error { return c.publish(ctx, args, o) },
	}
}

// published is a publish's answer.
type published struct {
	Room  string `json:"room"`
	Epoch string `json:"epoch"`
	Seq   uint64 `json:"seq"`
	ID    string `json:"id"`
}

func (c *cli) publish(ctx context.Context, args []string, o publishOptions) error {
	if len(args) < 1 || len(args) > 2 {
		return usagef("publish takes ROOM and an optional BODY (or - for stdin)")
	}
	room := args[0]
	if !wire.ValidRoom(room) {
		return usagef("invalid room name %q: 1 to 128 characters of A-Z a-z 0-9 . _ ~ -", printable(room, 140))
	}
	if o.typ != "" && !headerSafe(o.typ, 64) {
		return usagef("--type: 1 to 64 visible ASCII characters")
	}
	if o.idemKey != "" && !headerSafe(o.idemKey, 255) {
		return usagef("--idempotency-key: 1 to 255 visible ASCII characters")
	}
	if o.ttl != "" && !headerSafe(o.ttl, 64) {
		return usagef("--ttl: a duration such as 30s or 5m, or whole seconds")
	}
	var body []byte
	if len(args) == 2 && args[1] != "-" {
		body = []byte(args[1])
	} else {
		b, err := io.ReadAll(io.LimitReader(c.io.in, maxPublishBody+1))
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if len(b) > maxPublishBody {
			return usagef("the body on stdin is larger than %d bytes", maxPublishBody)
		}
		body = b
	}
	h := http.Header{}
	switch o.contentType {
	case "json":
		h.Set("Content-Type", "application/json")
	case "text":
		h.Set("Content-Type", "text/plain; charset=utf-8")
	case "auto":
		if json.Valid(body) {
			h.Set("Content-Type", "application/json")
		} else {
			h.Set("Content-Type", "text/plain; charset=utf-8")
		}
	default:
		return usagef("--content-type is json, text or auto")
	}
	if o.typ != "" {
		h.Set("Event-Type", o.typ)
	}
	if o.idemKey != "" {
		h.Set("Idempotency-Key", o.idemKey)
	}
	if o.ttl != "" {
		h.Set("Event-TTL", o.ttl)
	}
	raw, err := c.do(ctx, request{method: http.MethodPost, url: c.url + "/rooms/" + url.PathEscape(room) + "/events",
		token: c.token, header: h, body: body})
	if err != nil {
		return err
	}
	var p published
	if err := json.Unmarshal(raw, &p); err != nil || p.ID == "" {
		return fmt.Errorf("the answer is not {\"room\",\"epoch\",\"seq\",\"id\"}")
	}
	if c.json {
		return c.printJSON(raw)
	}
	c.printf("%s\n", printable(p.ID, 300))
	return nil
}
