package plan

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/roomcast/roomcast/cmd/internal/size"
)

// Exit codes, as every roomcastctl command uses them.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

const usageText = `usage: roomcastctl plan [flags]

Capacity plan of a fleet: what one workload costs each pod and each Redis shard,
and which resource reaches its limit first. Per-pod limits come from a
cmd/loadgen -json report (--limits); per-shard limits from --shard-*-limit.
A limit that is not given is reported unknown.

Examples:
  roomcastctl plan --pods 3 --rooms 10000 --members 4 --publish-rate 2000 --payload 512
  roomcastctl plan --pods 12 --rooms 50000 --members 2-20 --publish-rate 0.2/room \
      --payload 1KiB --redis cluster --shards 6 --pod-memory 1280Mi \
      --reserved-memory 200MiB --limits fanout.json
  roomcastctl plan --pods 6 --rooms 100 --members 5000 --routing affinity \
      --publish-rate 50 --payload 300 --limits fanout.json --json

Flags:
`

// Run is "roomcastctl plan": it parses args (the flags after "plan"), prints the
// plan to stdout (a table, or JSON with --json) and returns the exit code: 0, 1
// when the limits file cannot be read or is not a loadgen report, 2 for a usage
// error.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag's error is printed once, below
	in := Inputs{Pods: 3, Rooms: 1000, MembersMin: 2, MembersMax: 2, Payload: 256, Routing: RoundRobin, Redis: Cluster, RoomNameLen: 16}
	var (
		members                         = "2"
		rate                            = "100"
		payload                         = "256"
		podMemory, reserved             string
		shards                          = -1
		limitsPath                      string
		asJSON                          bool
		shardPub, shardDel, shardEgress string
	)
	fs.IntVar(&in.Pods, "pods", in.Pods, "gateway pods")
	fs.Int64Var(&in.Rooms, "rooms", in.Rooms, "rooms with members")
	fs.StringVar(&members, "members", members, "members (streams) per room: N, or a range LO-HI")
	fs.StringVar(&rate, "publish-rate", rate, "events/s over all rooms (`N` or N/s), or per room (N/room)")
	fs.StringVar(&payload, "payload", payload, "event body size as published (`bytes`: 512, 1KiB)")
	fs.StringVar(&in.Routing, "routing", in.Routing, "how streams reach pods: round-robin (any pod) or affinity (a room's streams on as few pods as hold them)")
	fs.StringVar(&in.Redis, "redis", in.Redis, "standalone or cluster")
	fs.IntVar(&shards, "shards", shards, "Redis Cluster primaries (default 3; 1 for standalone)")
	fs.IntVar(&in.RoomNameLen, "room-name-len", in.RoomNameLen, "characters in a room name (sizes frames and doorbells)")
	fs.StringVar(&podMemory, "pod-memory", "", "a pod's memory limit (`bytes`: 1280Mi, 2GiB); with rss_per_conn_kib from --limits it bounds streams per pod")
	fs.StringVar(&reserved, "reserved-memory", "", "the part of --pod-memory not for streams (`bytes`: the process at rest, --recent-bytes, --max-queued-bytes)")
	fs.Int64Var(&in.MaxStreams, "max-streams", 0, "the pods' --max-streams admission cap (`N`; 0: none)")
	fs.StringVar(&limitsPath, "limits", "", "per-pod limits: a cmd/loadgen -json report (`file`)")
	fs.StringVar(&shardPub, "shard-publish-limit", "", "publishes/s one Redis primary sustains (`N`)")
	fs.StringVar(&shardDel, "shard-delivery-limit", "", "doorbell pushes/s one Redis primary sustains (`N`)")
	fs.StringVar(&shardEgress, "shard-egress-limit", "", "push bytes/s one Redis primary sustains (`bytes`)")
	fs.BoolVar(&asJSON, "json", false, "print the plan as JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return exitOK
		}
		fmt.Fprintf(stderr, "roomcastctl plan: %v\nrun 'roomcastctl plan --help' for usage\n", err)
		return exitUsage
	}
	usage := func(err error) int {
		fmt.Fprintf(stderr, "roomcastctl plan: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	var err error
	if in.MembersMin, in.MembersMax, err = ParseMembers(members); err != nil {
		return usage(err)
	}
	r, perRoom, err := ParseRate(rate)
	if err != nil {
		return usage(err)
	}
	in.PublishRate = r
	if perRoom {
		in.PublishRate = r * float64(in.Rooms)
	}
	pl, err := size.Parse(payload)
	if err != nil {
		return usage(err)
	}
	if pl > maxPayload {
		return usage(fmt.Errorf("payload must be 1..%d bytes", maxPayload))
	}
	in.Payload = int(pl)
	for _, s := range []struct {
		v   string
		out *int64
	}{{podMemory, &in.PodMemory}, {reserved, &in.ReservedMemory}} {
		if s.v == "" {
			continue
		}
		if *s.out, err = size.Parse(s.v); err != nil {
			return usage(err)
		}
	}
	for _, s := range []struct {
		v    string
		out  *float64
		size bool
	}{{shardPub, &in.ShardPublishLimit, false}, {shardDel, &in.ShardDeliveryLimit, false}, {shardEgress, &in.ShardEgressLimit, true}} {
		if s.v == "" {
			continue
		}
		if s.size {
			n, err := size.Parse(s.v)
			if err != nil {
				return usage(err)
			}
			*s.out = float64(n)
		} else if *s.out, err = parseNumber(strings.TrimSpace(s.v)); err != nil {
			return usage(fmt.Errorf("shard limit %q: %w", s.v, err))
		}
	}
	switch {
	case shards >= 0:
		in.Shards = shards
	case in.Redis == Standalone:
		in.Shards = 1
	default:
		in.Shards = 3
	}
	if err := in.Validate(); err != nil {
		return usage(err)
	}

	var lim Limits
	if limitsPath != "" {
		if lim, err = readLimits(limitsPath); err != nil {
			fmt.Fprintf(stderr, "roomcastctl plan: %v\n", err)
			return exitFailed
		}
	}
	p, err := Compute(in, lim)
	if err != nil {
		return usage(err)
	}
	if asJSON {
		err = json.NewEncoder(stdout).Encode(p) // one line, as every --json output
	} else {
		err = p.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "roomcastctl plan: write: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func readLimits(path string) (Limits, error) {
	f, err := os.Open(path)
	if err != nil {
		return Limits{}, fmt.Errorf("limits: %w", err)
	}
	defer f.Close()
	l, err := DecodeLimits(f)
	if err != nil {
		return Limits{}, fmt.Errorf("limits %s: %w", path, err)
	}
	l.Source = path
	return l, nil
}
