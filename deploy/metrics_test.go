package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/redistest"
)

// referencedMetrics returns every metric name the dashboard and the alert rules
// select, with where each is used.
func referencedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	refs := map[string][]string{}
	add := func(where, expr string) {
		for _, n := range metricNames(expr) {
			refs[n] = append(refs[n], where)
		}
	}
	d, _, err := loadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range d.queries() {
		add("dashboard "+q.where, q.expr)
	}
	var rules ruleFile
	if err := loadYAML(alertsFile, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add("alert "+r.Alert+r.Record, r.Expr)
		}
	}
	return refs
}

// TestDashboardAndAlertMetricsExist starts two gateway pods, one on a real Redis and
// one with the embedded log (each mode has metrics of its own: roomcast_redis_up,
// roomcast_log_rooms). On each it publishes to a room, refuses a bad publish, follows
// the room with a stream that resumes (a history read) and stays for a live event,
// then scrapes /metrics. Every metric the dashboard or an alert selects must be
// exposed by one of the pods, or its panel stays empty and its alert never fires.
func TestDashboardAndAlertMetricsExist(t *testing.T) {
	refs := referencedMetrics(t)
	if len(refs) == 0 {
		t.Fatal("the dashboard and the alerts select no metric")
	}
	for name, where := range refs {
		if strings.HasPrefix(name, "redis_") {
			if !slices.Contains(redisExporterMetrics, name) {
				t.Errorf("%s selects %s, which redis_exporter %s does not export (redisExporterMetrics)", where[0], name, redisExporterVersion)
			}
			delete(refs, name) // the Redis nodes' metrics, not the pods'
			continue
		}
		if !strings.HasPrefix(name, "roomcast_") && !strings.HasPrefix(name, "go_") {
			t.Errorf("%s selects %s, outside the pod's roomcast_ and go_ metrics and redis_exporter's redis_", where[0], name)
		}
	}

	rs := redistest.Standalone(t)
	exposed := map[string]bool{}
	for _, args := range [][]string{{"--redis", rs.Addr}, nil} {
		p := gatewaytest.Start(t, gatewaytest.Options{Bin: gatewayBin, Args: append(args, "--drain-delay", "0s")})
		for name := range provokeMetrics(t, p, redistest.Prefix(t)) {
			exposed[name] = true
		}
	}
	var missing []string
	for name, where := range refs {
		if !exposed[name] {
			missing = append(missing, fmt.Sprintf("%s (%s)", name, strings.Join(slices.Compact(where), "; ")))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("the pods expose %d metric names, not these %d that the dashboard or the alerts select:\n  %s",
			len(exposed), len(missing), strings.Join(missing, "\n  "))
	}
}

// provokeMetrics publishes to room on p, refuses a bad publish, follows the room with
// a stream that resumes from before the first event and stays for a second, live one,
// and returns the metric names p then exposes (a histogram's as _bucket, _sum and
// _count).
func provokeMetrics(t *testing.T, p *gatewaytest.Process, room string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	publish := func(body string, want int) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Public+"/rooms/"+room+"/events", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("%s: publish %s: %d %s, want %d", p.Name, body, res.StatusCode, out, want)
		}
	}
	publish(`{"n":1}`, http.StatusCreated)
	publish(`{"n":`, http.StatusBadRequest)

	streamCtx, endStream := context.WithCancel(ctx)
	defer endStream()
	req, err := http.NewRequestWithContext(streamCtx, http.MethodGet, p.Public+"/rooms/"+room+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", "0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: stream: status %d", p.Name, res.StatusCode)
	}
	dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
	await := func(seq string) {
		t.Helper()
		for {
			ev, err := dec.Next()
			if err != nil {
				t.Fatalf("%s: stream ended before seq %s: %v", p.Name, seq, err)
			}
			if strings.Contains(string(ev.Data), `"seq":`+seq+",") {
				return
			}
		}
	}
	await("1") // from the log: the stream resumed from before it
	publish(`{"n":2}`, http.StatusCreated)
	await("2") // live, through the doorbell

	m, err := gatewaytest.Scrape(ctx, http.DefaultClient, p.Admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for key := range m {
		name, _, _ := strings.Cut(key, "{")
		names[name] = true
	}
	return names
}
