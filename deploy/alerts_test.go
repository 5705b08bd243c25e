package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	alertsFile     = "prometheus/alerts.yaml"
	alertTestsFile = "prometheus/alerts_test.yaml"
	// runbookBase is where every alert's runbook_url points: a section of
	// deploy/README.md's "Operating roomcast", one heading per alert, named as the
	// alert.
	runbookBase = "https://github.com/roomcast/roomcast/blob/main/deploy/README.md#"
)

// promtoolPath is Prometheus' promtool: $ROOMCAST_PROMTOOL, else promtool on PATH
// (Debian's prometheus package installs it in /usr/bin).
func promtoolPath() (string, error) { return prometheusBinary("promtool", "ROOMCAST_PROMTOOL") }

// prometheusBinary is one of the binaries of Debian's prometheus package: $env, else
// name on PATH.
func prometheusBinary(name, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found (set %s, or apt-get install prometheus)", name, env)
}

// needPromtool returns promtool's path; it skips t when promtool is missing, and
// fails it under CI=true.
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := promtoolPath()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI=true requires the promtool checks to run", err)
		}
		t.Skip(err)
	}
	return p
}

// promtool runs promtool with args in dir and returns its combined output.
func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(needPromtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAlertRulesPassPromtool: Prometheus' own tool accepts the rules (syntax, PromQL,
// templates, no duplicates) and their unit tests pass.
func TestAlertRulesPassPromtool(t *testing.T) {
	if out, err := promtool(t, ".", "check", "rules", alertsFile); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	if out, err := promtool(t, ".", "test", "rules", alertTestsFile); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", alertTestsFile, err, out)
	}
}

// ruleFile is the part of a Prometheus rule file the checks read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// alertTests is the part of a promtool test file the checks read.
type alertTests struct {
	RuleFiles          []string `json:"rule_files"`
	EvaluationInterval string   `json:"evaluation_interval"`
	Tests              []struct {
		Name        string `json:"name"`
		Interval    string `json:"interval"`
		InputSeries []struct {
			Series string `json:"series"`
			Values string `json:"values"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func loadYAML(path string, v any) error {
	data, err := readBounded(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		return fmt.Errorf("deploy/%s: %w", path, err)
	}
	return nil
}

var severities = []string{"critical", "warning", "info"}

// checkAlerts returns what is wrong with the alerts of rules and with how tests cover
// them: every alert has a severity, a summary, a description and a runbook anchor
// named after it, and the tests see it fire and see it stay silent.
func checkAlerts(rules ruleFile, tests alertTests) []error {
	var errs []error
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	seen := map[string]bool{}
	anchor := regexp.MustCompile(`^[a-z0-9-]+$`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if seen[r.Alert] {
				errs = append(errs, fmt.Errorf("alert %s is defined twice", r.Alert))
			}
			seen[r.Alert] = true
			if !slices.Contains(severities, r.Labels["severity"]) {
				errs = append(errs, fmt.Errorf("alert %s: severity %q, want one of %v", r.Alert, r.Labels["severity"], severities))
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					errs = append(errs, fmt.Errorf("alert %s has no %s annotation", r.Alert, k))
				}
			}
			if u := r.Annotations["runbook_url"]; u != "" {
				a, ok := strings.CutPrefix(u, runbookBase)
				if want := strings.ToLower(r.Alert); !ok || a != want || !anchor.MatchString(a) {
					errs = append(errs, fmt.Errorf("alert %s: runbook_url %q, want %s%s (the heading of deploy/README.md named after the alert)", r.Alert, u, runbookBase, want))
				}
			}
			for _, err := range countersInRates(r.Expr) {
				errs = append(errs, fmt.Errorf("alert %s: %w", r.Alert, err))
			}
			if !fires[r.Alert] {
				errs = append(errs, fmt.Errorf("alert %s: no case in %s expects it to fire", r.Alert, alertTestsFile))
			}
			if !silent[r.Alert] {
				errs = append(errs, fmt.Errorf("alert %s: no case in %s expects it to stay silent", r.Alert, alertTestsFile))
			}
		}
	}
	if len(seen) == 0 {
		errs = append(errs, fmt.Errorf("%s defines no alert", alertsFile))
	}
	for name := range fires {
		if !seen[name] {
			errs = append(errs, fmt.Errorf("%s tests alert %s, which %s does not define", alertTestsFile, name, alertsFile))
		}
	}
	if want := filepath.Base(alertsFile); !slices.Equal(tests.RuleFiles, []string{want}) {
		errs = append(errs, fmt.Errorf("%s loads %v, want [%s]", alertTestsFile, tests.RuleFiles, want))
	}
	return errs
}

// counterSuffixes end the names of counters and of a histogram's cumulative series.
var counterSuffixes = []string{"_total", "_count", "_sum", "_bucket"}

// countersInRates returns an error for each counter expr selects outside rate() or
// increase(): an alert on a counter's absolute value depends on when the pod started.
func countersInRates(expr string) []error {
	var errs []error
	for _, name := range metricNames(expr) {
		if !slices.ContainsFunc(counterSuffixes, func(s string) bool { return strings.HasSuffix(name, s) }) {
			continue
		}
		re := regexp.MustCompile(`(\w*)\(\s*` + regexp.QuoteMeta(name) + `\b|` + regexp.QuoteMeta(name) + `\b`)
		for _, m := range re.FindAllStringSubmatch(expr, -1) {
			if fn := m[1]; fn != "rate" && fn != "increase" {
				errs = append(errs, fmt.Errorf("counter %s is not inside rate() or increase()", name))
				break
			}
		}
	}
	return errs
}

// TestAlertRulesAreDocumentedAndCovered: every alert carries what an on-call person
// needs (severity, summary, description, runbook), and its unit tests cover both
// outcomes. promtool runs the tests; this checks that they exist.
func TestAlertRulesAreDocumentedAndCovered(t *testing.T) {
	var rules ruleFile
	var tests alertTests
	if err := loadYAML(alertsFile, &rules); err != nil {
		t.Fatal(err)
	}
	if err := loadYAML(alertTestsFile, &tests); err != nil {
		t.Fatal(err)
	}
	for _, err := range checkAlerts(rules, tests) {
		t.Error(err)
	}

	// The checks bite: break each rule on a copy and require a complaint.
	breakers := map[string]func(*ruleFile, *alertTests){
		"no severity": func(r *ruleFile, _ *alertTests) { delete(r.Groups[0].Rules[0].Labels, "severity") },
		"no summary":  func(r *ruleFile, _ *alertTests) { delete(r.Groups[0].Rules[0].Annotations, "summary") },
		"wrong anchor": func(r *ruleFile, _ *alertTests) {
			r.Groups[0].Rules[0].Annotations["runbook_url"] = runbookBase + "operating-roomcast"
		},
		"untested": func(_ *ruleFile, tt *alertTests) { tt.Tests = nil },
		"absolute count": func(r *ruleFile, _ *alertTests) {
			r.Groups[0].Rules[0].Expr = `sum by (job) (roomcast_streams_opened_total{resumed="true"}) > 1000`
		},
	}
	for name, breakIt := range breakers {
		var r ruleFile
		var tt alertTests
		if err := loadYAML(alertsFile, &r); err != nil {
			t.Fatal(err)
		}
		if err := loadYAML(alertTestsFile, &tt); err != nil {
			t.Fatal(err)
		}
		if len(r.Groups) == 0 || len(r.Groups[0].Rules) == 0 || r.Groups[0].Rules[0].Alert == "" {
			t.Fatalf("%s: the first rule of the first group is not an alert", alertsFile)
		}
		breakIt(&r, &tt)
		if len(checkAlerts(r, tt)) == 0 {
			t.Errorf("%s: the checks found nothing wrong", name)
		}
	}
}

// readmeAnchors returns the GitHub anchors of a README's headings, and whether it
// has the "Operating roomcast" section the runbooks live in.
func readmeAnchors(path string) (map[string]bool, bool, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, false, err
	}
	anchors, operating := map[string]bool{}, false
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if title == "Operating roomcast" {
			operating = true
		}
		anchors[githubAnchor(title)] = true
	}
	return anchors, operating, nil
}

// githubAnchor is the anchor GitHub gives a heading: lower case, punctuation other
// than - and _ dropped, spaces turned into -.
func githubAnchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAlertRunbooksInREADME: every alert's runbook_url lands on a heading of
// deploy/README.md, in its "Operating roomcast" section.
func TestAlertRunbooksInREADME(t *testing.T) {
	anchors, operating, err := readmeAnchors("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !operating {
		t.Fatal(`deploy/README.md has no "Operating roomcast" section: the runbooks live there`)
	}
	var rules ruleFile
	if err := loadYAML(alertsFile, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if a, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase); ok && !anchors[a] {
				t.Errorf("alert %s: deploy/README.md has no heading whose anchor is #%s (a heading %q)", r.Alert, a, r.Alert)
			}
		}
	}
}
