package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	dashboardFile = "grafana/roomcast.json"
	// dsVar is how every query names its data source: the dashboard's datasource
	// variable, so that an import binds it to the Prometheus the user picks.
	dsVar = "${datasource}"
	// gridWidth is Grafana's dashboard grid, in columns.
	gridWidth = 24
	// minSchemaVersion is the dashboard schema of Grafana 10.
	minSchemaVersion = 38
)

// dashboard is the part of a Grafana dashboard model the checks read.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name       string `json:"name"`
			Datasource *dsRef `json:"datasource"`
			Expr       string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      any    `json:"query"`
	Datasource *dsRef `json:"datasource"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type gridPos struct {
	H, W, X, Y int
}

type panel struct {
	ID         int      `json:"id"`
	Type       string   `json:"type"`
	Title      string   `json:"title"`
	GridPos    *gridPos `json:"gridPos"`
	Datasource *dsRef   `json:"datasource"`
	Targets    []struct {
		Datasource *dsRef `json:"datasource"`
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// panelTypes are the core Grafana 10 panel types the dashboard may use.
var panelTypes = []string{"row", "timeseries", "state-timeline", "stat", "table", "gauge", "bargauge", "heatmap", "text"}

// dashboardMetrics are the signals the dashboard must chart, whatever else it does.
var dashboardMetrics = []string{
	"roomcast_streams_open", "roomcast_streams_opened_total", "roomcast_streams_closed_total",
	"roomcast_client_drops_total", "roomcast_gaps_repaired_total", "roomcast_room_resyncs_total",
	"roomcast_forks_total", "roomcast_resyncs_sent_total",
	"roomcast_publish_to_deliver_seconds_bucket", "roomcast_fanout_lag_seconds_bucket",
	"roomcast_publish_duration_seconds_bucket", "go_sched_latencies_seconds_bucket",
	"roomcast_redis_up", "roomcast_redis_call_duration_seconds_bucket", "roomcast_redis_call_errors_total",
	"roomcast_redis_resubscribes_total", "roomcast_doorbell_repairs_total",
	"roomcast_redis_subscriber_connections", "roomcast_redis_subscriber_output_buffer_bytes",
	"roomcast_redis_subscriber_memory_bytes",
	"roomcast_drain_state", "roomcast_drain_closed_total",
	"roomcast_events_published_total", "roomcast_publish_errors_total",
	"roomcast_log_rooms", "roomcast_log_bytes", "roomcast_log_evictions_total",
	"roomcast_build_info",
	// The Redis tier, from redis_exporter: what its alerts watch.
	"redis_client_output_buffer_limit_disconnections_total", "redis_client_recent_max_output_buffer_bytes",
	"redis_connected_clients", "redis_max_clients", "redis_cpu_sys_seconds_total",
	"redis_cpu_user_seconds_total", "redis_pubsubshard_channels",
}

func loadDashboard() (*dashboard, []byte, error) {
	data, err := readBounded(dashboardFile)
	if err != nil {
		return nil, nil, err
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, nil, fmt.Errorf("deploy/%s: %w", dashboardFile, err)
	}
	return &d, data, nil
}

// query is one PromQL expression of the dashboard and where it is.
type query struct {
	where string
	expr  string
}

// labelValuesRE is Grafana's label_values(metric, label) variable query.
var labelValuesRE = regexp.MustCompile(`^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// queries returns every PromQL expression of d: panel targets, annotations and the
// variables' label_values (reduced to their series selector).
func (d *dashboard) queries() []query {
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				qs = append(qs, query{fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, t.RefID), t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, a := range d.Annotations.List {
		qs = append(qs, query{fmt.Sprintf("annotation %q", a.Name), a.Expr})
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m := labelValuesRE.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		qs = append(qs, query{fmt.Sprintf("variable %q", v.Name), q})
	}
	return qs
}

// checkDashboard returns what keeps d from importing cleanly into Grafana 10+ and
// from following the fleet: the schema version, the datasource and pod variables, a
// data source reference to the variable on every panel and query (and no other data
// source anywhere in raw), unique panel ids, and grid positions inside the grid that
// do not overlap.
func checkDashboard(d *dashboard, raw []byte) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.SchemaVersion < minSchemaVersion {
		bad("schemaVersion %d, want %d or later (Grafana 10)", d.SchemaVersion, minSchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		bad("the dashboard needs a uid and a title (uid %q, title %q)", d.UID, d.Title)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || v.Query != "prometheus" {
		bad("no datasource variable of type datasource for prometheus: %+v", v)
	}
	if v, ok := vars["pod"]; !ok || v.Type != "query" || v.Datasource == nil || *v.Datasource != (dsRef{"prometheus", dsVar}) {
		bad("no pod variable querying the datasource variable: %+v", v)
	}
	// Every data source reference, wherever it is, is the variable.
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return append(errs, err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if k == "datasource" {
					switch ds := c.(type) {
					case map[string]any:
						if ds["uid"] != dsVar || ds["type"] != "prometheus" {
							bad("%s.datasource is %v, want {type: prometheus, uid: %s}", path, ds, dsVar)
						}
					default:
						bad("%s.datasource is %v, want {type: prometheus, uid: %s}", path, ds, dsVar)
					}
				}
				walk(path+"."+k, c)
			}
		case []any:
			for _, c := range v {
				walk(path, c)
			}
		}
	}
	walk("", tree)
	if strings.Contains(string(raw), "${DS_") || strings.Contains(string(raw), `"__inputs"`) {
		bad("the dashboard is an export for sharing (__inputs, ${DS_…}): use the datasource variable")
	}
	ids := map[int]string{}
	var placed []panel
	var check func([]panel)
	check = func(ps []panel) {
		for _, p := range ps {
			name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if p.ID <= 0 {
				bad("%s: id must be positive", name)
			} else if other, dup := ids[p.ID]; dup {
				bad("%s: id also used by %s", name, other)
			}
			ids[p.ID] = name
			if !slices.Contains(panelTypes, p.Type) {
				bad("%s: type %q is not a core Grafana panel", name, p.Type)
			}
			if g := p.GridPos; g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > gridWidth {
				bad("%s: gridPos %+v is not inside the %d-column grid", name, p.GridPos, gridWidth)
			} else {
				for _, o := range placed {
					if og := o.GridPos; g.X < og.X+og.W && og.X < g.X+g.W && g.Y < og.Y+og.H && og.Y < g.Y+g.H {
						bad("%s: gridPos %+v overlaps panel %d %q", name, *g, o.ID, o.Title)
					}
				}
				placed = append(placed, p)
			}
			if p.Type == "row" {
				check(p.Panels)
				continue
			}
			if p.Datasource == nil || *p.Datasource != (dsRef{"prometheus", dsVar}) {
				bad("%s: datasource %+v, want the datasource variable", name, p.Datasource)
			}
			if len(p.Targets) == 0 {
				bad("%s: no query", name)
			}
			refs := map[string]bool{}
			for _, t := range p.Targets {
				if t.RefID == "" || refs[t.RefID] {
					bad("%s: refId %q missing or repeated", name, t.RefID)
				}
				refs[t.RefID] = true
				if t.Datasource == nil || *t.Datasource != (dsRef{"prometheus", dsVar}) {
					bad("%s target %s: datasource %+v, want the datasource variable", name, t.RefID, t.Datasource)
				}
				if strings.TrimSpace(t.Expr) == "" {
					bad("%s target %s: empty expr", name, t.RefID)
				}
			}
		}
	}
	check(d.Panels)
	if len(ids) == 0 {
		bad("the dashboard has no panel")
	}
	used := map[string]bool{}
	for _, q := range d.queries() {
		names := metricNames(q.expr)
		if len(names) == 0 {
			bad("%s: %q names no metric", q.where, q.expr)
		}
		for _, n := range names {
			used[n] = true
		}
	}
	for _, m := range dashboardMetrics {
		if !used[m] {
			bad("no panel charts %s", m)
		}
	}
	return errs
}

// TestDashboardImportsIntoGrafana checks the dashboard's model (see checkDashboard),
// and that the checks bite.
func TestDashboardImportsIntoGrafana(t *testing.T) {
	d, raw, err := loadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range checkDashboard(d, raw) {
		t.Error(err)
	}

	breakers := map[string]func(*dashboard, *[]byte){
		"old schema":      func(d *dashboard, _ *[]byte) { d.SchemaVersion = 36 },
		"no pod variable": func(d *dashboard, _ *[]byte) { d.Templating.List = d.Templating.List[:1] },
		"duplicate id":    func(d *dashboard, _ *[]byte) { d.Panels[2].ID = d.Panels[1].ID },
		"overlap":         func(d *dashboard, _ *[]byte) { g := *d.Panels[1].GridPos; d.Panels[2].GridPos = &g },
		"off the grid":    func(d *dashboard, _ *[]byte) { d.Panels[1].GridPos.X = 20 },
		"fixed datasource": func(d *dashboard, _ *[]byte) {
			d.Panels[1].Targets[0].Datasource = &dsRef{"prometheus", "P1809F7CD0C75ACF3"}
		},
		"fixed uid in raw": func(_ *dashboard, raw *[]byte) {
			*raw = []byte(strings.Replace(string(*raw), dsVar, "P1809F7CD0C75ACF3", 1))
		},
		"a signal left out": func(d *dashboard, _ *[]byte) {
			for i := range d.Panels {
				for j := range d.Panels[i].Targets {
					d.Panels[i].Targets[j].Expr = strings.ReplaceAll(d.Panels[i].Targets[j].Expr, "roomcast_forks_total", "roomcast_rooms")
				}
			}
		},
	}
	for name, breakIt := range breakers {
		d, raw, err := loadDashboard()
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Panels) < 3 || d.Panels[1].GridPos == nil || len(d.Panels[1].Targets) == 0 {
			t.Fatalf("%s: the dashboard's first panels are not a row and two charts", dashboardFile)
		}
		breakIt(d, &raw)
		if len(checkDashboard(d, raw)) == 0 {
			t.Errorf("%s: the checks found nothing wrong", name)
		}
	}
}

// grafanaVars are the values the PromQL check gives Grafana's variables.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "${__rate_interval}", "5m",
	"$__interval", "1m", "${__interval}", "1m",
	"$__range", "1h", "${__range}", "1h",
	"${redis_job}", ".*", "$redis_job", ".*",
	"${job}", ".*", "$job", ".*",
	"${pod}", ".*", "$pod", ".*",
)

// TestDashboardQueriesParse hands every query of the dashboard, its variables
// replaced, to promtool as recording rules: Prometheus' own parser reads them.
func TestDashboardQueriesParse(t *testing.T) {
	needPromtool(t)
	d, _, err := loadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	var where []string // where each rule's query is, as "name: where"
	for i, q := range d.queries() {
		expr := grafanaVars.Replace(q.expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: %q uses a variable the dashboard does not define", q.where, q.expr)
			continue
		}
		name := "dashboard:query_" + strconv.Itoa(i)
		where = append(where, name+": "+q.where)
		rules = append(rules, rule{name, expr})
	}
	file := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	data, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, ".", "check", "rules", path); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s\nthe queries:\n%s", err, out, strings.Join(where, "\n"))
	}
}
