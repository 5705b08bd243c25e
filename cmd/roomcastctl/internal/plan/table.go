package plan

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// WriteTable prints the plan for people.
func (p *Plan) WriteTable(w io.Writer) error {
	in := p.Inputs
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, v ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, v...)...)
	}
	members := strconv.Itoa(in.MembersMin)
	if in.MembersMax != in.MembersMin {
		members += "-" + strconv.Itoa(in.MembersMax)
	}
	redis := "standalone Redis"
	if in.Redis == Cluster {
		redis = fmt.Sprintf("Redis Cluster of %d shards", in.Shards)
	}
	row("workload", "%d pods, %d rooms x %s members, %s events/s, %d-byte payload, %s, %s",
		in.Pods, in.Rooms, members, num(in.PublishRate), in.Payload, in.Routing, redis)
	row("limits", "%s", p.limitsLine())
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	row("E_pods (pods a publish reaches)", "%s", num(p.EPods))
	row("streams per pod / total", "%s / %s", num(p.StreamsPerPod), num(p.Streams))
	if p.StreamsPerPodLimit != nil {
		row("streams a pod's memory holds", "%s", num(*p.StreamsPerPodLimit))
	}
	if p.MemoryPerPod != nil {
		row("memory per pod", "%s", bytesOf(*p.MemoryPerPod))
	}
	row("SSUBSCRIBEs per pod / total", "%s / %s", num(p.SSubscribesPerPod), num(p.SSubscribes))
	row("publishes/s per shard / total", "%s / %s", num(p.PublishesPerSecPerShard), num(p.PublishesPerSec))
	row("Redis deliveries/s per shard / total", "%s / %s", num(p.RedisDeliveriesPerSecPerShard), num(p.RedisDeliveriesPerSec))
	row("doorbell push", "%d B", p.DoorbellBytes)
	row("Redis egress per shard / total", "%s/s / %s/s", bytesOf(p.RedisEgressPerSecPerShard), bytesOf(p.RedisEgressPerSec))
	row("largest room's pushes/s (one shard)", "%s", num(p.HotRoomDeliveriesPerSec))
	row("SSE frame", "%d B", p.FrameBytes)
	row("client deliveries/s per pod", "%s", num(p.ClientDeliveriesPerSecPerPod))
	row("client egress per pod", "%s/s", bytesOf(p.ClientEgressPerSecPerPod))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "resource\tuse\tlimit\tutilisation\tscale factor")
	for _, r := range p.Resources {
		use := num(r.Use) + " " + r.Unit
		if r.Unit == "bytes/s" {
			use = bytesOf(r.Use) + "/s"
		}
		if r.Limit == nil {
			fmt.Fprintf(tw, "%s\t%s\tunknown (%s)\t\t\n", r.Name, use, r.Unknown)
			continue
		}
		limit := num(*r.Limit)
		if r.Unit == "bytes/s" {
			limit = bytesOf(*r.Limit) + "/s"
		}
		scale := "-"
		if r.Scale != nil {
			scale = num(*r.Scale) + "x"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%s\n", r.Name, use, limit, 100**r.Utilisation, scale)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	switch {
	case p.FirstLimit == "":
		fmt.Fprintln(w, "first limit: unknown (no limit given; see --limits and --shard-*-limit)")
	case *p.FirstScale < 1:
		fmt.Fprintf(w, "first limit: %s, already over it (%.1f%% of the load fits)\n", p.FirstLimit, 100**p.FirstScale)
	default:
		fmt.Fprintf(w, "first limit: %s, at %sx this load (rooms of this shape, same pods and shards)\n", p.FirstLimit, num(*p.FirstScale))
	}
	if p.PodsNeeded != nil {
		fmt.Fprintf(w, "pods needed for the per-pod limits: %d (E_pods %s, Redis deliveries %s/s)\n",
			*p.PodsNeeded, num(*p.EPodsAtPodsNeeded), num(*p.RedisDeliveriesAtPodsNeeded))
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func (p *Plan) limitsLine() string {
	l := p.Limits
	if l.Source == "" {
		return "none (--limits not given)"
	}
	s := l.Source
	if l.Scenario != "" {
		s += " (scenario " + l.Scenario + ")"
	}
	opt := func(name string, v *float64) string {
		if v == nil {
			return name + " unknown"
		}
		return name + " " + num(*v)
	}
	s += ": " + opt("deliveries_per_sec", l.DeliveriesPerSec) + ", " + opt("egress_bytes_per_sec", l.EgressBytesPerSec) +
		", " + opt("rss_per_conn_kib", l.RSSPerConnKiB)
	if l.Subscribers != nil {
		s += fmt.Sprintf(", measured with %d streams", *l.Subscribers)
	}
	return s
}

// num formats a count or rate: below 1000 with 4 significant digits, above as a
// whole number with thousands separators.
func num(v float64) string {
	if v < 1000 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	if v >= 1e18 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// bytesOf formats a byte count with an IEC unit.
func bytesOf(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return num(v) + " B"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}
