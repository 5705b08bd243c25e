package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/roomcast/roomcast/replay/redistest"
)

const (
	redisConfFile   = "redis/redis.conf"
	redisACLFile    = "redis/users.acl"
	redisScrapeFile = "prometheus/redis-scrape.yaml"
	exporterUser    = "redis-exporter"
)

// aclUser returns the line of users.acl (or of any file of ACL lines) for user.
func aclUser(path, user string) (string, error) {
	data, err := readBounded(path)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "user "+user+" ") {
			return line, nil
		}
	}
	return "", fmt.Errorf("%s: no line for user %s", path, user)
}

// TestRedisACLFileIsTheDocumentedOne: users.acl gives the gateway exactly the user
// deploy/README.md documents (the one replay's ACL tests run Redis with), and turns
// the default user off.
func TestRedisACLFileIsTheDocumentedOne(t *testing.T) {
	for _, user := range []string{"roomcast", exporterUser} {
		file, err := aclUser(redisACLFile, user)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := aclUser("README.md", user)
		if err != nil {
			t.Fatal(err)
		}
		if file != doc {
			t.Errorf("user %s:\n%s has   %s\nREADME.md has %s", user, redisACLFile, file, doc)
		}
	}
	if _, err := aclUser(redisACLFile, "default"); err != nil {
		t.Error(err)
	} else if line, _ := aclUser(redisACLFile, "default"); line != "user default off" {
		t.Errorf("%s: %q, want the default user off", redisACLFile, line)
	}
}

// exporterCommands are the commands redis_exporter sends to a node with the
// settings of redis/exporter.yaml (no key checks, no client list, CONFIG off):
// its user must be allowed each of them.
var exporterCommands = [][]string{
	{"PING"}, {"CLIENT", "SETNAME", "redis_exporter"}, {"INFO", "ALL"},
	{"CLUSTER", "INFO"}, {"CLUSTER", "NODES"}, {"CLUSTER", "SLOTS"},
	{"SLOWLOG", "GET", "1"}, {"SLOWLOG", "LEN"}, {"LATENCY", "LATEST"}, {"LATENCY", "HISTOGRAM"},
	{"COMMAND", "INFO", "COMMANDLOG"},
}

// exporterRefused are commands the exporter's user must not run: no CONFIG (it
// reveals secrets), no key or channel of the rooms, no client list.
var exporterRefused = [][]string{
	{"CONFIG", "GET", "*"}, {"GET", "room:{r}:seq"}, {"XRANGE", "room:{r}:log", "-", "+"},
	{"SPUBLISH", "room:{r}", "x"}, {"SSUBSCRIBE", "room:{r}"}, {"CLIENT", "LIST"},
	{"KEYS", "*"}, {"ACL", "LIST"},
}

// TestRedisConfigAsRedisReadsIt starts a redis-server with redis.conf included and
// users.acl as its ACL file, and reads back what Redis made of them: the pub/sub
// output-buffer limits (whose soft limit the RoomcastRedisOutputBufferHigh rule
// names), maxmemory-clients, tcp-keepalive; and asks Redis (ACL DRYRUN) whether the
// exporter's user may run what redis_exporter sends, and nothing of the rooms.
func TestRedisConfigAsRedisReadsIt(t *testing.T) {
	conf, err := filepath.Abs(redisConfFile)
	if err != nil {
		t.Fatal(err)
	}
	acl, err := readBounded(redisACLFile)
	if err != nil {
		t.Fatal(err)
	}
	// An inspector user of the test's own, to read the settings and ask DRYRUN.
	const inspector, inspectorPassword = "inspector", "inspector-test-pw"
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	acl = append(acl, fmt.Sprintf("user %s on >%s ~* &* +@all\n", inspector, inspectorPassword)...)
	if err := os.WriteFile(aclFile, acl, 0o600); err != nil {
		t.Fatal(err)
	}
	s := redistest.StandaloneWith(t, redistest.Options{ACLFile: aclFile, Args: []string{"--include", conf}})
	do := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		full := append([]string{"-e", "--no-auth-warning", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
			"--user", inspector, "--pass", inspectorPassword}, args...)
		out, err := exec.CommandContext(ctx, "redis-cli", full...).CombinedOutput()
		text := strings.TrimSpace(string(out))
		if err != nil {
			return text, fmt.Errorf("redis-cli %s: %w: %s", strings.Join(args, " "), err, text)
		}
		return text, nil
	}
	config := func(name string) string {
		t.Helper()
		out, err := do("CONFIG", "GET", name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out, "\n")
		if len(lines) != 2 {
			t.Fatalf("CONFIG GET %s: %q", name, out)
		}
		return lines[1]
	}

	limits := config("client-output-buffer-limit")
	m := regexp.MustCompile(`pubsub (\d+) (\d+) (\d+)`).FindStringSubmatch(limits)
	if m == nil {
		t.Fatalf("client-output-buffer-limit %q has no pubsub class", limits)
	}
	hard, _ := strconv.ParseInt(m[1], 10, 64)
	soft, _ := strconv.ParseInt(m[2], 10, 64)
	secs, _ := strconv.ParseInt(m[3], 10, 64)
	if hard != 64<<20 || soft != 16<<20 || secs != 60 {
		t.Errorf("pubsub limits: hard %d, soft %d for %ds; deploy/README.md's arithmetic assumes 64 MiB, 16 MiB for 60 s", hard, soft, secs)
	}
	if got, err := softLimitInRule(); err != nil {
		t.Error(err)
	} else if got != soft {
		t.Errorf("RoomcastRedisOutputBufferHigh assumes a soft limit of %d bytes; redis.conf sets %d", got, soft)
	}
	for name, want := range map[string]string{
		"maxmemory-clients": strconv.Itoa(1 << 30),
		"tcp-keepalive":     "60",
		"timeout":           "0",
		"maxmemory-policy":  "noeviction",
	} {
		if got := config(name); got != want {
			t.Errorf("%s is %q, want %q", name, got, want)
		}
	}

	for _, cmd := range exporterCommands {
		out, err := do(append([]string{"ACL", "DRYRUN", exporterUser}, cmd...)...)
		if err != nil || out != "OK" {
			t.Errorf("user %s may not run %s, which redis_exporter sends: %v %s", exporterUser, strings.Join(cmd, " "), err, out)
		}
	}
	for _, cmd := range exporterRefused {
		out, err := do(append([]string{"ACL", "DRYRUN", exporterUser}, cmd...)...)
		if err != nil {
			t.Fatal(err)
		}
		if out == "OK" {
			t.Errorf("user %s may run %s", exporterUser, strings.Join(cmd, " "))
		}
	}
}

// softLimitRE is the soft limit RoomcastRedisOutputBufferHigh compares against, in
// MiB: "> 0.5 * 16 * 1024 * 1024".
var softLimitRE = regexp.MustCompile(`>\s*[0-9.]+\s*\*\s*(\d+)\s*\*\s*1024\s*\*\s*1024`)

func softLimitInRule() (int64, error) {
	var rules ruleFile
	if err := loadYAML(alertsFile, &rules); err != nil {
		return 0, err
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "RoomcastRedisOutputBufferHigh" {
				continue
			}
			m := softLimitRE.FindStringSubmatch(r.Expr)
			if m == nil {
				return 0, fmt.Errorf("RoomcastRedisOutputBufferHigh: no soft limit (> f * N * 1024 * 1024) in %q", r.Expr)
			}
			n, err := strconv.ParseInt(m[1], 10, 64)
			return n << 20, err
		}
	}
	return 0, errors.New("no alert RoomcastRedisOutputBufferHigh")
}

// scrapeConfig is the part of prometheus/redis-scrape.yaml the checks read.
type scrapeConfig struct {
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		MetricsPath   string `json:"metrics_path"`
		HTTPSDConfigs []struct {
			URL             string `json:"url"`
			RefreshInterval string `json:"refresh_interval"`
		} `json:"http_sd_configs"`
		RelabelConfigs []struct {
			SourceLabels []string `json:"source_labels"`
			TargetLabel  string   `json:"target_label"`
			Replacement  string   `json:"replacement"`
		} `json:"relabel_configs"`
	} `json:"scrape_configs"`
}

// checkExporter returns what is wrong with one redis_exporter Deployment: the
// image is the version whose metric names the rules use, it connects as the ACL
// file's exporter user with a password from a Secret and with CONFIG off, a
// Service reaches its port, and the scrape config reaches that Service.
func checkExporter(tree *deployTree, d *deployment, scrape scrapeConfig) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", d.source.source, fmt.Sprintf(format, args...)))
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		return fmt.Errorf("%s: %d containers, want 1", d.source.source, len(cs))
	}
	c := cs[0]
	if want := "oliver006/redis_exporter:" + redisExporterVersion; c.Image != want {
		bad("image %q, want %q (the metric names of the rules are this version's)", c.Image, want)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if v := env["REDIS_USER"].Value; v != exporterUser {
		bad("REDIS_USER %q, want %s (redis/users.acl)", v, exporterUser)
	}
	if e := env["REDIS_PASSWORD"]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		bad("REDIS_PASSWORD must come from a Secret")
	}
	if v := env["REDIS_EXPORTER_CONFIG_COMMAND"].Value; v != "-" {
		bad("REDIS_EXPORTER_CONFIG_COMMAND %q, want \"-\": the user may not run CONFIG", v)
	}
	if v := env["REDIS_EXPORTER_IS_CLUSTER"].Value; v != "true" {
		bad("REDIS_EXPORTER_IS_CLUSTER %q, want true (for /discover-cluster-nodes)", v)
	}
	if v := env["REDIS_ADDR"].Value; !strings.HasPrefix(v, "redis://") && !strings.HasPrefix(v, "rediss://") {
		bad("REDIS_ADDR %q, want a seed node's redis:// address", v)
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			port = p.ContainerPort
		}
	}
	if port == 0 {
		bad("no container port named metrics")
	}
	if l := env["REDIS_EXPORTER_WEB_LISTEN_ADDRESS"].Value; l != fmt.Sprintf(":%d", port) {
		bad("REDIS_EXPORTER_WEB_LISTEN_ADDRESS %q is not the metrics port %d", l, port)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad("the container must run read-only and without privilege escalation")
	}
	// The Service that selects the exporter, and its port to the metrics port.
	var addrs []string
	for _, s := range tree.services {
		if len(s.Spec.Selector) == 0 || !subset(s.Spec.Selector, d.Spec.Template.Labels) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if tp := targetPort(p); tp.StrVal == "metrics" || tp.IntVal == port {
				addrs = append(addrs, fmt.Sprintf("%s.%%s.svc:%d", s.Name, p.Port))
			}
		}
	}
	if len(addrs) == 0 {
		bad("no Service selects the exporter and targets its metrics port")
	}
	reaches := func(hostport string) bool {
		for _, a := range addrs {
			if host, _, ok := strings.Cut(hostport, ".svc:"); ok {
				ns := host[strings.LastIndex(host, ".")+1:]
				if hostport == fmt.Sprintf(a, ns) {
					return true
				}
			}
		}
		return false
	}
	if len(scrape.ScrapeConfigs) != 1 {
		return errors.Join(append(errs, fmt.Errorf("%s: %d scrape configs, want 1", redisScrapeFile, len(scrape.ScrapeConfigs)))...)
	}
	job := scrape.ScrapeConfigs[0]
	if job.MetricsPath != "/scrape" {
		bad("%s: metrics_path %q, want /scrape", redisScrapeFile, job.MetricsPath)
	}
	if len(job.HTTPSDConfigs) != 1 || !reaches(strings.TrimSuffix(strings.TrimPrefix(job.HTTPSDConfigs[0].URL, "http://"), "/discover-cluster-nodes")) {
		bad("%s: http_sd_configs must be the exporter's Service /discover-cluster-nodes (%v)", redisScrapeFile, addrs)
	}
	replaced := false
	for _, r := range job.RelabelConfigs {
		if r.TargetLabel == "__address__" {
			replaced = reaches(r.Replacement)
		}
	}
	if !replaced {
		bad("%s: no relabeling sends the scrape to the exporter's Service (%v)", redisScrapeFile, addrs)
	}
	return errors.Join(errs...)
}

// TestRedisExporterManifest checks redis/exporter.yaml against the ACL file, the
// rules' metric names and the scrape config, has promtool read the scrape config,
// and breaks each rule once to see the check bite.
func TestRedisExporterManifest(t *testing.T) {
	tree := mustLoadDeployTree(t)
	if len(tree.exporters) == 0 {
		t.Fatal("no redis_exporter Deployment under deploy/")
	}
	var scrape scrapeConfig
	if err := loadYAML(redisScrapeFile, &scrape); err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, k := range tree.kustomizations {
		for _, r := range k.Resources {
			listed = listed || filepath.Clean(filepath.Join(filepath.Dir(k.path), r)) == filepath.Clean("redis/exporter.yaml")
		}
	}
	if !listed {
		t.Error("kustomization.yaml does not list redis/exporter.yaml")
	}
	for _, d := range tree.exporters {
		if err := checkExporter(tree, d, scrape); err != nil {
			t.Error(err)
		}
	}
	if out, err := promtool(t, ".", "check", "config", redisScrapeFile); err != nil {
		t.Errorf("promtool check config %s: %v\n%s", redisScrapeFile, err, out)
	}

	breakers := map[string]func(*deployment, *scrapeConfig){
		"other version": func(d *deployment, _ *scrapeConfig) {
			d.Spec.Template.Spec.Containers[0].Image = "oliver006/redis_exporter:latest"
		},
		"CONFIG on": func(d *deployment, _ *scrapeConfig) {
			c := &d.Spec.Template.Spec.Containers[0]
			for i := range c.Env {
				if c.Env[i].Name == "REDIS_EXPORTER_CONFIG_COMMAND" {
					c.Env[i].Value = "CONFIG"
				}
			}
		},
		"scrape elsewhere": func(_ *deployment, s *scrapeConfig) {
			rc := s.ScrapeConfigs[0].RelabelConfigs
			rc[len(rc)-1].Replacement = "redis-exporter.default.svc:9121"
		},
	}
	for name, breakIt := range breakers {
		tree := mustLoadDeployTree(t)
		var s scrapeConfig
		if err := loadYAML(redisScrapeFile, &s); err != nil {
			t.Fatal(err)
		}
		d := tree.exporters[0]
		breakIt(d, &s)
		if checkExporter(tree, d, s) == nil {
			t.Errorf("%s: the checks found nothing wrong", name)
		}
	}
}
