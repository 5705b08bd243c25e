package deploy_test

import (
	"slices"
	"strings"
	"testing"
)

// promqlKeywords are PromQL's words that stand where a metric name could.
var promqlKeywords = []string{
	"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
	"offset", "bool", "atan2", "inf", "nan",
	// Aggregation operators, which may stand before their "by (…)".
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
}

// labelListKeywords are followed by a parenthesized list of label names.
var labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// metricNames returns the metric names a PromQL expression selects, in order of first
// appearance, as written (a histogram's _bucket, _sum or _count included): every
// identifier outside strings and label matchers that is neither a function call, a
// keyword, a label list nor a duration or number. Grafana's variables ($name,
// ${name}) are skipped. It is a tokenizer, not a parser: it reads the expressions
// this module writes, which promtool parses (TestDashboardQueriesParse,
// TestAlertRulesPassPromtool).
func metricNames(expr string) []string {
	var names []string
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && strings.IndexByte(" \t\r\n", expr[i]) >= 0 {
			i++
		}
		return i
	}
	depth := 0 // inside {…}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '{':
			depth++
			i++
		case c == '}':
			depth = max(0, depth-1)
			i++
		case c == '#': // a comment runs to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '$': // a Grafana variable
			i++
			if i < len(expr) && expr[i] == '{' {
				for i < len(expr) && expr[i] != '}' {
					i++
				}
				i++
				continue
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			switch {
			case depth > 0: // a label name
			case slices.Contains(labelListKeywords, strings.ToLower(word)) && next < len(expr) && expr[next] == '(':
				for next < len(expr) && expr[next] != ')' {
					next++
				}
				j = next + 1
			case slices.Contains(promqlKeywords, strings.ToLower(word)):
			case next < len(expr) && expr[next] == '(': // a function
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j
		default:
			i++
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	cases := []struct {
		name, expr string
		want       []string
	}{
		{"selector", `roomcast_streams_open`, []string{"roomcast_streams_open"}},
		{"matchers", `roomcast_x{job=~"$job",reason="roomcast_not_a_metric",le!="1"}`, []string{"roomcast_x"}},
		{"range and grafana interval", `sum by (le) (rate(roomcast_a_bucket{job=~"$job"}[$__rate_interval]))`, []string{"roomcast_a_bucket"}},
		{"variable in braces", `rate(roomcast_a[${__rate_interval}]) > 0`, []string{"roomcast_a"}},
		{"quantile", `histogram_quantile(0.99, sum by (instance, le) (rate(go_sched_latencies_seconds_bucket[5m])))`, []string{"go_sched_latencies_seconds_bucket"}},
		{"binary with on", `roomcast_a and on (job, instance) roomcast_b == 1`, []string{"roomcast_a", "roomcast_b"}},
		{"group_left labels", `roomcast_a * on (instance) group_left (version) roomcast_build_info`, []string{"roomcast_a", "roomcast_build_info"}},
		{"offset and numbers", `rate(roomcast_c[1h] offset 5m) > 3e2 * 1.5`, []string{"roomcast_c"}},
		{"without and bool", `sum without (pod) (roomcast_d) > bool 0`, []string{"roomcast_d"}},
		{"repeated", `roomcast_e / roomcast_e`, []string{"roomcast_e"}},
		{"name followed by paren", `(roomcast_f)`, []string{"roomcast_f"}},
		{"multi-line", "sum(rate(roomcast_g[5m]))\n  / sum(rate(roomcast_h[5m]))", []string{"roomcast_g", "roomcast_h"}},
		{"comment", "roomcast_i # roomcast_j", []string{"roomcast_i"}},
		{"nothing", `vector(1)`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
				t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}
