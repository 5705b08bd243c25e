package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// gatewayBin is the gateway binary TestMain builds.
var gatewayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "roomcast-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	secretsDir = filepath.Join(dir, "secrets")
	gatewayBin, err = gatewaytest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// redisNowhere is what a manifest's --redis becomes in the test: a loopback port
// nothing listens on. The gateway starts without Redis and connects in the
// background, so the start proves the other settings and the log kind stays "redis".
const redisNowhere = "127.0.0.1:1"

// flagInfo is one flag as the binary's -help describes it.
type flagInfo struct {
	name string
	def  string // the default as -help prints it, unquoted; "" when none is printed
}

var (
	helpOnce  sync.Once
	helpFlags map[string]flagInfo
	helpErr   error
)

// binaryFlags returns the binary's flags, read once from its -help output, which the
// flag package prints in a fixed form: "  -name type" and then the usage on lines
// starting with "    \t", ending in "(default X)" when the default is not the zero
// value.
func binaryFlags() (map[string]flagInfo, error) {
	helpOnce.Do(func() {
		out, err := exec.Command(gatewayBin, "-help").CombinedOutput()
		if err != nil {
			helpErr = fmt.Errorf("deploy: %s -help: %w\n%s", gatewayBin, err, out)
			return
		}
		helpFlags = map[string]flagInfo{}
		defaultRE := regexp.MustCompile(`\(default (.*)\)$`)
		var cur *flagInfo
		for _, line := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(line, "  -"); ok {
				f := flagInfo{name: strings.Fields(rest)[0]}
				helpFlags[f.name] = f
				cur = &f
				continue
			}
			if cur == nil || !strings.HasPrefix(line, "    \t") {
				continue
			}
			if m := defaultRE.FindStringSubmatch(line); m != nil {
				def := m[1]
				if u, err := strconv.Unquote(def); err == nil {
					def = u
				}
				cur.def = def
				helpFlags[cur.name] = *cur
			}
		}
		if len(helpFlags) == 0 {
			helpErr = fmt.Errorf("deploy: no flags in the output of %s -help:\n%s", gatewayBin, out)
		}
	})
	return helpFlags, helpErr
}

// listenerFlags are the flags whose default is a loopback host:port: the test moves
// them to 127.0.0.1:0 so that the binary can start anywhere.
func listenerFlags() ([]string, error) {
	flags, err := binaryFlags()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range flags {
		host, port, err := net.SplitHostPort(f.def)
		if err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
			continue
		}
		if _, err := strconv.Atoi(port); err == nil {
			names = append(names, f.name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// envName is a flag's environment twin, as cmd/gateway/README.md documents it: ROOMCAST_ and
// the name in capitals with dashes as underscores.
func envName(flagName string) string {
	return "ROOMCAST_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flagOfEnv is the flag whose twin name is, or "" when no flag of the binary has it.
func flagOfEnv(name string) (string, error) {
	flags, err := binaryFlags()
	if err != nil {
		return "", err
	}
	for f := range flags {
		if envName(f) == name {
			return f, nil
		}
	}
	return "", nil
}

// podRun is what the binary did with a pod's args and env.
type podRun struct {
	// settings are the attributes of the start-up line: every setting in effect.
	settings map[string]any
	// goMemLimit is the Go runtime's memory limit in bytes, as its metrics say.
	goMemLimit float64
	// hosts is, for each Host header probed, the status of GET /healthz on the
	// public listener and of GET /metrics on the admin listener.
	hosts map[string][2]int
	err   error
}

var (
	runsMu sync.Mutex
	runs   = map[string]*podRun{}
)

// runPod starts the binary with args and env (listeners on loopback, --redis
// pointed at nothing), reads its start-up line and metrics, asks both listeners
// for a page with each of hosts as the Host header, then SIGTERMs it and waits for
// a clean exit. Runs are cached by args, env and hosts.
func runPod(args []string, env [][2]string, hosts []string) *podRun {
	key, _ := json.Marshal([]any{args, env, hosts})
	runsMu.Lock()
	defer runsMu.Unlock()
	if r, ok := runs[string(key)]; ok {
		return r
	}
	r := &podRun{}
	r.settings, r.goMemLimit, r.hosts, r.err = startPod(args, env, hosts)
	runs[string(key)] = r
	return r
}

func startPod(args []string, env [][2]string, hosts []string) (map[string]any, float64, map[string][2]int, error) {
	listeners, err := listenerFlags()
	if err != nil {
		return nil, 0, nil, err
	}
	// Never start the binary on the manifest's addresses (every interface).
	for _, l := range []string{"addr", "admin-addr"} {
		if !slices.Contains(listeners, l) {
			return nil, 0, nil, fmt.Errorf("-help shows no loopback default for --%s: cannot move it to loopback (listener flags found: %q)", l, listeners)
		}
	}
	var argv []string
	for _, l := range listeners {
		argv = append(argv, "--"+l+"=127.0.0.1:0")
	}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case slices.Contains(listeners, name):
		case name == "redis":
			argv = append(argv, "--redis="+redisNowhere)
		default:
			argv = append(argv, a)
		}
	}
	var envv []string
	for _, kv := range env {
		v := kv[1]
		if kv[0] == envName("redis") && v != "" {
			v = redisNowhere
		}
		envv = append(envv, kv[0]+"="+v)
	}
	var (
		// The launcher returns on the start-up line before OnLog has seen it.
		started  = make(chan []byte, 1)
		draining = make(chan struct{})
		once     sync.Once
	)
	p, err := gatewaytest.Launch(gatewaytest.Options{
		Name: "gateway with the manifest's settings",
		Bin:  gatewayBin,
		Args: argv,
		Env:  envv,
		OnLog: func(line []byte) {
			var m struct{ Msg string }
			_ = json.Unmarshal(line, &m)
			switch {
			case m.Msg == gatewaytest.StartedMsg:
				select {
				case started <- slices.Clone(line):
				default:
				}
			case strings.HasPrefix(m.Msg, "signal received"):
				once.Do(func() { close(draining) })
			}
		},
	})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("the gateway refuses these args and env: %w", err)
	}
	defer p.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var line []byte
	select {
	case line = <-started:
	case <-ctx.Done():
		return nil, 0, nil, errors.New("the launcher saw the start-up line, the log reader did not")
	}
	var settings map[string]any
	if err := json.Unmarshal(line, &settings); err != nil {
		return nil, 0, nil, fmt.Errorf("start-up line %q: %w", line, err)
	}
	metrics, err := gatewaytest.Scrape(ctx, http.DefaultClient, p.Admin+"/metrics")
	if err != nil {
		return nil, 0, nil, err
	}
	limit := metrics.Value("go_gc_gomemlimit_bytes")
	served := map[string][2]int{}
	for _, h := range hosts {
		var st [2]int
		for i, url := range []string{p.Public + "/healthz", p.Admin + "/metrics"} {
			if st[i], err = statusWithHost(ctx, url, h); err != nil {
				return nil, 0, nil, err
			}
		}
		served[h] = st
	}
	// A drain waits --drain-delay; the second SIGTERM closes at once. The second is
	// sent once the first was handled, or the kernel could merge the two.
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return nil, 0, nil, err
	}
	select {
	case <-draining:
	case <-p.Done():
	case <-ctx.Done():
		return nil, 0, nil, errors.New("the gateway did not start draining on SIGTERM")
	}
	_ = p.Signal(syscall.SIGTERM)
	code, err := p.Wait(10 * time.Second)
	if err != nil {
		return nil, 0, nil, err
	}
	if code != 0 {
		return nil, 0, nil, fmt.Errorf("the gateway exited %d after SIGTERM:\n%s", code, p.Log())
	}
	return settings, limit, served, nil
}

// statusWithHost is the status of a GET of url sent with host as the Host header.
func statusWithHost(ctx context.Context, url, host string) (int, error) {
	req, err := gatewaytest.NewRequest(ctx, http.MethodGet, url, nil, "Host", host)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// duration is a duration setting of the start-up line.
func (r *podRun) duration(key string) (time.Duration, error) {
	s, ok := r.settings[key].(string)
	if !ok {
		return 0, fmt.Errorf("the start-up line has no duration %q", key)
	}
	return time.ParseDuration(s)
}

// number is a numeric setting of the start-up line.
func (r *podRun) number(key string) (int64, error) {
	n, ok := r.settings[key].(float64)
	if !ok {
		return 0, fmt.Errorf("the start-up line has no number %q", key)
	}
	return int64(n), nil
}

// str is a string setting of the start-up line.
func (r *podRun) str(key string) (string, error) {
	s, ok := r.settings[key].(string)
	if !ok {
		return "", fmt.Errorf("the start-up line has no string %q", key)
	}
	return s, nil
}

// bodyLimits are --max-body and --max-batch-body as the binary started with d's
// arguments reports them.
func bodyLimits(tree *deployTree, d *deployment) (maxBody, maxBatch int64, err error) {
	r, err := d.run(tree)
	if err != nil {
		return 0, 0, err
	}
	maxBody, err1 := r.number("max_body")
	maxBatch, err2 := r.number("max_batch_body")
	return maxBody, maxBatch, errors.Join(err1, err2)
}
