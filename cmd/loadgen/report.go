package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// maxLossyListed bounds how many lossy subscribers the report names.
const maxLossyListed = 10

// maxSeriesRows bounds the rows of the rebalance scenario's series in the text
// report.
const maxSeriesRows = 20

// Report is the outcome of a run; its JSON form is the -json output.
type Report struct {
	// Scenario is the -scenario the run started from; empty for plain flags.
	Scenario string `json:"scenario"`
	// Timeline has one point per second of the measured window. It and the other
	// nested parts come first: scripts take a top-level number as the last
	// occurrence of its name on the line, and the timeline repeats those names.
	Timeline []TimelinePoint `json:"timeline"`
	// Storm is the storm scenario's outcome; Drains the rolling-drain's, per pod.
	Storm  *StormResult  `json:"storm,omitempty"`
	Drains []DrainResult `json:"drains,omitempty"`
	// Chaos is the chaos scenario's schedule, timeline and summary.
	Chaos *ChaosResult `json:"chaos,omitempty"`
	// Rebalance is the rebalance scenario's outcome.
	Rebalance *RebalanceResult `json:"rebalance,omitempty"`
	// Transports splits the subscribers' figures by transport, "sse" and "ws", when
	// -ws-share > 0; the top-level figures stay those of every subscriber.
	Transports map[string]*TransportResult `json:"transports,omitempty"`

	// Pods is how many servers (-url) the run spread its streams and publishes
	// over: the figures below are their sum.
	Pods           int     `json:"pods"`
	Idle           bool    `json:"idle,omitempty"`
	Subscribers    int     `json:"subscribers"`
	Connected      int64   `json:"connected"`
	ConnectedAtEnd int64   `json:"connected_at_end"` // at the end of the measured window
	ConnectErrors  int64   `json:"connect_errors"`
	ConnectSeconds float64 `json:"connect_seconds,omitempty"`
	Refused        int     `json:"refused,omitempty"`

	Published       int64            `json:"published"`
	PublishErrors   int64            `json:"publish_errors"`
	PublishErrorsBy map[string]int64 `json:"publish_errors_by,omitempty"`
	Deliveries      uint64           `json:"deliveries"`
	// Expired counts the deliveries that were expired markers (an event whose
	// -ttl passed before it reached the subscriber): delivered, not lost.
	Expired            uint64  `json:"expired"`
	ExpectedDeliveries uint64  `json:"expected_deliveries"`
	MeasuredSeconds    float64 `json:"measured_seconds"`
	DeliveriesPerSec   float64 `json:"deliveries_per_sec"`
	PublishesPerSec    float64 `json:"publishes_per_sec"`
	// EgressBytesPerSec is the stream bytes the subscribers read per second in the
	// measured window (SSE framing included, HTTP headers not).
	EgressBytesPerSec float64 `json:"egress_bytes_per_sec"`

	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	P999ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`

	Gaps         uint64 `json:"gaps"`
	Duplicates   uint64 `json:"duplicates"`
	Late         uint64 `json:"late"`
	EpochChanges uint64 `json:"epoch_changes"`
	Malformed    uint64 `json:"malformed"`
	Resyncs      uint64 `json:"resyncs"`
	Reconnects   int64  `json:"reconnects"`
	// Undelivered counts acknowledged events a subscriber still lacked when the
	// run ended; Lost is every event that never arrived: Gaps + Undelivered.
	Undelivered uint64   `json:"undelivered"`
	Lost        uint64   `json:"lost"`
	LossySubs   int      `json:"lossy_subscribers"`
	LossyDetail []string `json:"lossy_detail,omitempty"`

	RSSBeforeKiB  int64   `json:"rss_before_kib,omitempty"`
	RSSAfterKiB   int64   `json:"rss_after_kib,omitempty"`
	RSSPerConnKiB float64 `json:"rss_per_conn_kib,omitempty"`
	// With -idle, the same once the connections were held idle for -duration: what
	// the server keeps for idle connections once its connect-time garbage is
	// collected and returned (the runtime's own pace, nothing forced).
	RSSHeldKiB        int64   `json:"rss_held_kib,omitempty"`
	RSSHeldPerConnKiB float64 `json:"rss_held_per_conn_kib,omitempty"`

	// GoroutinesBefore and Goroutines are the server's go_goroutines (-metrics-url)
	// before the first connection and at the plateau: with -idle at the end of the
	// hold, otherwise once every subscriber has connected, before publishing.
	GoroutinesBefore int64 `json:"server_goroutines_before,omitempty"`
	Goroutines       int64 `json:"server_goroutines,omitempty"`
}

// countGoroutines reads the server's goroutines at the plateau, when -metrics-url
// names where, unless the run was interrupted.
func (r *Report) countGoroutines(ctx context.Context, cfg *Config, hc *http.Client) error {
	if cfg.MetricsURL == "" || ctx.Err() != nil {
		return nil
	}
	n, err := readGoroutines(ctx, hc, cfg.MetricsURL)
	if err != nil {
		return err
	}
	r.Goroutines = n
	return nil
}

// measureHeldRSS records the server's memory with n streams held idle.
func (r *Report) measureHeldRSS(held, n int64) {
	r.RSSHeldKiB = held
	if n > 0 {
		r.RSSHeldPerConnKiB = float64(held-r.RSSBeforeKiB) / float64(n)
	}
}

// measureRSS records the server's memory around connecting n streams.
func (r *Report) measureRSS(before, after, n int64) {
	r.RSSBeforeKiB, r.RSSAfterKiB = before, after
	if n > 0 {
		r.RSSPerConnKiB = float64(after-before) / float64(n)
	}
}

// fill computes the report from the run's final state; every goroutine has returned.
func (r *Report) fill(cfg *Config, ls *loadState, subs []*subscriber, rooms []*room, pubs *publishers, w window) {
	r.Connected = ls.connectedOnce.Load()
	r.ConnectedAtEnd = w.open
	r.ConnectErrors = ls.connectErrors.Load()
	r.Reconnects = ls.reconnects.Load()
	r.PublishErrors = pubs.errTotal.Load()
	if r.PublishErrors > 0 {
		r.PublishErrorsBy = pubs.errorCounts()
	}
	for _, rm := range rooms {
		n := rm.published.Load()
		r.Published += n
		r.ExpectedDeliveries += uint64(n) * uint64(rm.members)
	}
	if secs := w.end.Sub(w.start).Seconds(); secs > 0 {
		r.MeasuredSeconds = secs
		r.DeliveriesPerSec = float64(w.deliveries1-w.deliveries0) / secs
		r.PublishesPerSec = float64(w.publishes1-w.publishes0) / secs
		r.EgressBytesPerSec = float64(w.bytes1-w.bytes0) / secs
	}
	if w.timeline != nil {
		r.Timeline = w.timeline
	}
	r.Storm, r.Drains, r.Rebalance = w.storm, w.drains, w.rebalance
	if r.Chaos = w.chaos; r.Chaos != nil {
		r.Chaos.fill(subs, w.start)
		r.Chaos.Incidents = cfg.chaos.fl.incidentList()
	}
	var lat latencies
	for _, s := range subs {
		if s.hist != nil {
			lat.add(s.hist)
		}
		r.addSubscriber(s)
	}
	r.P50ms = millis(lat.quantile(0.50))
	r.P99ms = millis(lat.quantile(0.99))
	r.P999ms = millis(lat.quantile(0.999))
	r.MaxMs = millis(time.Duration(lat.max) * time.Microsecond)
	r.MeanMs = millis(lat.mean())
	if cfg.WSShare > 0 {
		r.fillTransports(subs, rooms, w)
	}
}

func (r *Report) addSubscriber(s *subscriber) {
	t := &s.track
	r.Deliveries += s.deliveries.Load()
	r.Expired += t.Expired
	r.Gaps += t.Gaps()
	r.Duplicates += t.Duplicates
	r.Late += t.Late
	r.EpochChanges += t.EpochChanges
	r.Resyncs += t.Resyncs
	r.Malformed += s.malformed
	if s.fatal != nil {
		r.Refused++
	}
	missing := s.undelivered()
	r.Undelivered += missing
	r.Lost = r.Gaps + r.Undelivered
	if !t.Lossy() && s.malformed == 0 && missing == 0 {
		return
	}
	r.LossySubs++
	if len(r.LossyDetail) < maxLossyListed {
		r.LossyDetail = append(r.LossyDetail, describeLoss(s))
	}
}

func describeLoss(s *subscriber) string {
	t := &s.track
	var b strings.Builder
	fmt.Fprintf(&b, "sub %d room %s: gaps=%d dups=%d late=%d epoch_changes=%d malformed=%d undelivered=%d",
		s.id, s.room.name, t.Gaps(), t.Duplicates, t.Late, t.EpochChanges, s.malformed, s.undelivered())
	for i, m := range t.Missing() {
		if i == 3 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " missing %d-%d", m.Lo, m.Hi)
	}
	return b.String()
}

// Lossy reports whether the run saw a message lost, repeated or out of order that no
// resync explained, or a frame it could not account for.
func (r *Report) Lossy() bool {
	return r.Gaps > 0 || r.Duplicates > 0 || r.Late > 0 || r.EpochChanges > 0 || r.Malformed > 0 || r.Undelivered > 0
}

// WriteTable prints the human-readable report.
func (r *Report) WriteTable(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k string, format string, v ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, v...)...)
	}
	row("subscribers", "%d (connected %d, at end %d, connect errors %d, refused %d)",
		r.Subscribers, r.Connected, r.ConnectedAtEnd, r.ConnectErrors, r.Refused)
	if !r.Idle {
		r.writeLoad(row)
	}
	row("loss", "lost %d (gaps %d, undelivered %d), duplicates %d, late %d, epoch changes %d, malformed %d (%d subscribers)",
		r.Lost, r.Gaps, r.Undelivered, r.Duplicates, r.Late, r.EpochChanges, r.Malformed, r.LossySubs)
	row("recovery", "resyncs %d, reconnects %d", r.Resyncs, r.Reconnects)
	r.writeTransports(row)
	if s := r.Storm; s != nil {
		row("storm", "via %s at %.1fs: %d ended, %d back in %.3fs (%.0f reconnects/s)%s",
			s.Via, s.AtSeconds, s.Ended, s.Reconnected, s.ReconnectSeconds, s.ReconnectsPerSec, errorSuffix(s.Error))
	}
	for _, d := range r.Drains {
		row("drain", "%s: %d streams moved in %.3fs%s", d.URL, d.Moved, d.Seconds, errorSuffix(d.Error))
	}
	if rb := r.Rebalance; rb != nil {
		verdict := fmt.Sprintf("max/mean %.2f <= %.1f in %.1fs", rb.MaxOverMean, rb.Target, rb.Seconds)
		if !rb.Converged {
			verdict = fmt.Sprintf("not balanced: max/mean %.2f after %.1fs", rb.MaxOverMean, rb.Seconds)
		}
		row("rebalance", "%s joined empty: %s; streams per pod %v -> %v; sheds %v%s",
			rb.Joined, verdict, rb.StreamsAtJoin, rb.StreamsAtEnd, rb.Sheds, errorSuffix(rb.Error))
		// At most maxSeriesRows rows of the series; the JSON has every point.
		stride := max(1, (len(rb.Series)+maxSeriesRows-1)/maxSeriesRows)
		for i, pt := range rb.Series {
			if i%stride == 0 || i == len(rb.Series)-1 {
				row("  streams", "%6.1fs  %v", pt.Seconds, pt.Streams)
			}
		}
	}
	if r.RSSAfterKiB > 0 {
		row("server rss", "%d KiB -> %d KiB: %.2f KiB per connection", r.RSSBeforeKiB, r.RSSAfterKiB, r.RSSPerConnKiB)
	}
	if r.RSSHeldKiB > 0 {
		row("held idle", "%d KiB: %.2f KiB per connection", r.RSSHeldKiB, r.RSSHeldPerConnKiB)
	}
	if r.Goroutines > 0 {
		row("server goroutines", "%d -> %d at the plateau (%d connections)", r.GoroutinesBefore, r.Goroutines, r.ConnectedAtEnd)
	}
	for _, d := range r.LossyDetail {
		row("lossy", "%s", d)
	}
	return tw.Flush()
}

// writeLoad prints the publishing and latency rows.
func (r *Report) writeLoad(row func(k, format string, v ...any)) {
	row("published", "%d (errors %d%s)", r.Published, r.PublishErrors, formatErrors(r.PublishErrorsBy))
	row("deliveries", "%d (expected %d, expired %d)", r.Deliveries, r.ExpectedDeliveries, r.Expired)
	row("measured", "%.1fs: %.0f publishes/s, %.0f deliveries/s, %.0f egress bytes/s",
		r.MeasuredSeconds, r.PublishesPerSec, r.DeliveriesPerSec, r.EgressBytesPerSec)
	row("latency", "p50 %.2fms  p99 %.2fms  p99.9 %.2fms  max %.2fms  mean %.2fms", r.P50ms, r.P99ms, r.P999ms, r.MaxMs, r.MeanMs)
}

// WriteJSON prints the report as one JSON line.
func (r *Report) WriteJSON(out io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

func formatErrors(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return ": " + strings.Join(parts, " ")
}

func errorSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (error: " + e + ")"
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// nothingMeasured says why a run measured nothing at all (no subscriber ever
// connected, or every publish failed), or "" when it measured something.
func (r *Report) nothingMeasured() string {
	switch {
	case r.Subscribers > 0 && r.Connected == 0:
		return fmt.Sprintf("none of %d subscribers connected (%d connect errors)", r.Subscribers, r.ConnectErrors)
	case !r.Idle && r.Published == 0 && r.PublishErrors > 0:
		return fmt.Sprintf("every publish failed (%d errors)", r.PublishErrors)
	}
	return ""
}

// scenarioFailed says why the scenario's own action did not happen as asked (a
// storm that ended no stream or whose streams did not all come back, a drain that
// failed), or "" when it did or there was none.
func (r *Report) scenarioFailed() string {
	if st := r.Storm; st != nil {
		switch {
		case st.Error != "":
			return "storm: " + st.Error
		case st.Ended == 0:
			return "storm: no stream was ended"
		case st.Reconnected < st.Ended:
			return fmt.Sprintf("storm: %d of %d streams came back", st.Reconnected, st.Ended)
		}
	}
	for _, d := range r.Drains {
		if d.Error != "" {
			return "drain of " + d.URL + ": " + d.Error
		}
	}
	if c := r.Chaos; c != nil {
		if len(c.Incidents) > 0 {
			return c.Incidents[0]
		}
		for _, f := range c.Faults {
			if f.Error != "" {
				return fmt.Sprintf("%s %s at +%.1fs: %s", f.Kind, f.Target, f.AtSeconds, f.Error)
			}
		}
		if len(c.Faults) < len(c.Schedule) {
			return fmt.Sprintf("%d of %d scheduled faults injected", len(c.Faults), len(c.Schedule))
		}
	}
	return ""
}

// unbalanced says why the rebalance scenario's pods did not reach the balance it
// waits for, or "" when they did or there was no such scenario. Unlike a storm or a
// drain that did not happen, it is a failed check, as a loss is.
func (r *Report) unbalanced() string {
	if rb := r.Rebalance; rb != nil && !rb.Converged {
		return rb.Error
	}
	return ""
}
