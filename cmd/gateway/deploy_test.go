package main

// Drift test of the deployment examples: it parses every manifest under deploy/, the
// nginx example and the Dockerfile, feeds the gateway container's args and
// environment into parseConfig, and fails when they no longer agree with the binary.
// TestDeployDriftChecksBite breaks each rule on purpose to prove its check fails.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	repoRoot = "../.."
	// idleStreamBytes is the gateway's resident memory per idle stream (.ci/bench,
	// idle scenario: 31.04 KiB per connection).
	idleStreamBytes = 31 << 10
	// baseBytes is the resident memory of a gateway with no streams, rounded up
	// generously (runtime, binary, registry, Redis client).
	baseBytes = 64 << 20
	// shutdownMargin is what the grace period must leave after --drain-timeout: the
	// process gives its listeners and the log up to 5s after the drain, and the rest is
	// slack for a busy node.
	shutdownMargin = 10 * time.Second
	// defaultGracePeriod is Kubernetes' terminationGracePeriodSeconds when unset.
	defaultGracePeriod = 30 * time.Second
)

// deployCheck is one rule the deployment examples must follow.
type deployCheck struct {
	name  string
	check func(*deployTree, *deployment) error
}

var deployChecks = []deployCheck{
	{"container runs the image entrypoint", checkEntrypoint},
	{"args and env parse", checkParses},
	{"every ROOMCAST_ variable is a flag's twin", checkEnvNames},
	{"args are --name=value, each flag once, none also in env", checkArgsForm},
	{"listeners bind all interfaces", checkListenAll},
	{"container ports match --addr and --admin-addr", checkContainerPorts},
	{"readiness probe is GET /readyz on the public port", checkReadiness},
	{"liveness probe is GET /healthz on the public port", checkLiveness},
	{"drain delay + window < drain timeout", checkDrainOrder},
	{"grace period > preStop + drain timeout + margin", checkGracePeriod},
	{"services expose the public port only", checkServices},
	{"selectors match the pod labels", checkSelectors},
	{"non-root, read-only, no privileges", checkSecurity},
	{"memory limit holds --max-streams idle streams", checkMemory},
	{"GOMEMLIMIT below the memory limit", checkGoMemLimit},
	{"publish token comes from a Secret", checkPublishToken},
	{"several replicas share a Redis log", checkReplicasShareLog},
	{"service links are off", checkServiceLinks},
	{"Prometheus scrapes the admin port", checkPrometheus},
	{"ingresses route to the public port with SSE settings", checkIngresses},
	{"nginx.conf follows the flags", checkNginx},
	{"kustomization lists existing files", checkKustomization},
}

func TestDeployManifestsMatchTheBinary(t *testing.T) {
	tree := mustLoadDeployTree(t)
	if len(tree.deployments) == 0 {
		t.Fatal("no Deployment under deploy/")
	}
	for _, d := range tree.deployments {
		for _, c := range deployChecks {
			t.Run(d.Metadata.Name+"/"+c.name, func(t *testing.T) {
				if err := c.check(tree, d); err != nil {
					t.Errorf("%v\n[checked against Deployment %s, %s]", err, d.Metadata.Name, d.source)
				}
			})
		}
	}
}

// TestDeployDriftChecksBite breaks, in memory, one rule per check and requires that
// check to fail: a check that cannot fail guards nothing.
func TestDeployDriftChecksBite(t *testing.T) {
	breakages := map[string]func(*testing.T, *deployTree, *deployment){
		"container runs the image entrypoint": func(_ *testing.T, _ *deployTree, d *deployment) {
			d.gateway().Command = []string{"/bin/gateway"}
		},
		"args and env parse": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "heartbeat", "soon")
		},
		"every ROOMCAST_ variable is a flag's twin": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Env = append(c.Env, envVar{Name: "ROOMCAST_HEARTBEET", Value: "15s"})
		},
		"args are --name=value, each flag once, none also in env": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Env = append(c.Env, envVar{Name: "ROOMCAST_DRAIN_DELAY", Value: "1s"})
		},
		"listeners bind all interfaces": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "addr", "127.0.0.1:8080")
		},
		"container ports match --addr and --admin-addr": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "admin-addr", "0.0.0.0:9091")
		},
		"readiness probe is GET /readyz on the public port": func(t *testing.T, _ *deployTree, d *deployment) {
			p := d.gateway().ReadinessProbe
			if p == nil || p.HTTPGet == nil {
				t.Fatal("no readiness probe to break")
			}
			p.HTTPGet.Port = intOrString{Str: "admin", IsStr: true}
		},
		"liveness probe is GET /healthz on the public port": func(t *testing.T, _ *deployTree, d *deployment) {
			p := d.gateway().LivenessProbe
			if p == nil || p.HTTPGet == nil {
				t.Fatal("no liveness probe to break")
			}
			p.HTTPGet.Path = "/readyz"
		},
		"drain delay + window < drain timeout": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "drain-window", "45s")
		},
		"grace period > preStop + drain timeout + margin": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "drain-timeout", "55s")
		},
		"services expose the public port only": func(t *testing.T, tree *deployTree, _ *deployment) {
			if len(tree.services) == 0 {
				t.Fatal("no Service to break")
			}
			s := tree.services[0]
			s.Spec.Ports = append(s.Spec.Ports, servicePort{Name: "admin", Port: 9090, TargetPort: &intOrString{Str: "admin", IsStr: true}})
		},
		"selectors match the pod labels": func(t *testing.T, tree *deployTree, _ *deployment) {
			if len(tree.pdbs) == 0 {
				t.Fatal("no PodDisruptionBudget to break")
			}
			tree.pdbs[0].Spec.Selector.MatchLabels = map[string]string{"app": "someone-else"}
		},
		"non-root, read-only, no privileges": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			if c.SecurityContext == nil {
				c.SecurityContext = &securityContext{}
			}
			c.SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		},
		"memory limit holds --max-streams idle streams": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "max-streams", "100000")
		},
		"GOMEMLIMIT below the memory limit": func(_ *testing.T, _ *deployTree, d *deployment) {
			setEnv(d.gateway(), "GOMEMLIMIT", "4GiB")
		},
		"publish token comes from a Secret": func(_ *testing.T, _ *deployTree, d *deployment) {
			setEnv(d.gateway(), "ROOMCAST_PUBLISH_TOKEN", "committed-by-mistake")
		},
		"several replicas share a Redis log": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Env = slices.DeleteFunc(c.Env, func(e envVar) bool { return e.Name == "ROOMCAST_REDIS" })
			d.Spec.Replicas = ptr(int32(3))
		},
		"service links are off": func(_ *testing.T, _ *deployTree, d *deployment) {
			d.Spec.Template.Spec.EnableServiceLinks = nil
		},
		"Prometheus scrapes the admin port": func(_ *testing.T, _ *deployTree, d *deployment) {
			a := d.Spec.Template.Metadata.Annotations
			if a == nil {
				a = map[string]string{}
				d.Spec.Template.Metadata.Annotations = a
			}
			a["prometheus.io/scrape"], a["prometheus.io/port"] = "true", "8080"
		},
		"ingresses route to the public port with SSE settings": func(t *testing.T, tree *deployTree, _ *deployment) {
			if len(tree.ingresses) == 0 {
				t.Fatal("no Ingress to break")
			}
			tree.ingresses[0].Metadata.Annotations[nginxIngress+"proxy-read-timeout"] = "10"
		},
		"nginx.conf follows the flags": func(t *testing.T, tree *deployTree, _ *deployment) {
			loc := tree.nginx.find("http", "server", "location /rooms/")
			if loc == nil {
				t.Fatal("no location /rooms/ to break")
			}
			loc.child("client_max_body_size").Args = []string{"1m"}
		},
		"kustomization lists existing files": func(t *testing.T, tree *deployTree, _ *deployment) {
			if len(tree.kustomizations) == 0 {
				t.Fatal("no kustomization to break")
			}
			k := tree.kustomizations[0]
			k.Resources = append(k.Resources, "gone.yaml")
		},
	}
	for _, c := range deployChecks {
		t.Run(c.name, func(t *testing.T) {
			brk, ok := breakages[c.name]
			if !ok {
				t.Fatal("no breakage for this check: add one to prove it can fail")
			}
			tree := mustLoadDeployTree(t)
			if len(tree.deployments) == 0 {
				t.Fatal("no Deployment under deploy/")
			}
			d := tree.deployments[0]
			if err := c.check(tree, d); err != nil {
				t.Fatalf("the manifests fail this check before any breakage (TestDeployManifestsMatchTheBinary says why): %v", err)
			}
			brk(t, tree, d)
			err := c.check(tree, d)
			if err == nil {
				t.Fatal("still passes after the breakage")
			}
			t.Logf("fails as it should: %v", err)
		})
	}
	if len(breakages) != len(deployChecks) {
		t.Errorf("%d breakages for %d checks: a breakage names no check", len(breakages), len(deployChecks))
	}
}

// ---- the checks ----

func checkEntrypoint(tree *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	if len(tree.image.Entrypoint) == 0 {
		return errors.New("the Dockerfile has no exec-form ENTRYPOINT")
	}
	if len(c.Command) > 0 && !slices.Equal(c.Command, tree.image.Entrypoint) {
		return fmt.Errorf("command %q replaces the image's entrypoint %q", c.Command, tree.image.Entrypoint)
	}
	return nil
}

func checkParses(tree *deployTree, d *deployment) error {
	_, err := d.strictConfig(tree)
	return err
}

func checkEnvNames(tree *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	var errs []error
	if len(c.EnvFrom) > 0 {
		errs = append(errs, errors.New("envFrom hides variable names from this check: list each ROOMCAST_ variable under env"))
	}
	env := slices.Clone(tree.image.Env)
	for _, e := range c.Env {
		env = append(env, [2]string{e.Name, e.value()})
	}
	for _, kv := range env {
		name, value := kv[0], kv[1]
		rest, ok := strings.CutPrefix(name, "ROOMCAST_")
		if !ok {
			continue
		}
		flagName := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		if EnvName(flagName) != name {
			errs = append(errs, fmt.Errorf("%s is not the environment twin of any flag name (twins are ROOMCAST_ and the flag in capitals with underscores)", name))
			continue
		}
		if _, err := parseConfig([]string{"--" + flagName + "=" + value}, noEnv, io.Discard); err != nil {
			if strings.Contains(err.Error(), "not defined") {
				errs = append(errs, fmt.Errorf("%s: the binary has no flag --%s, so the gateway ignores it", name, flagName))
			} else {
				errs = append(errs, fmt.Errorf("%s=%q: %v", name, value, err))
			}
		}
	}
	return errors.Join(errs...)
}

func checkArgsForm(_ *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	var errs []error
	seen := map[string]string{}
	for _, a := range c.Args {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok || name == "" {
			errs = append(errs, fmt.Errorf("arg %q: write flags as --name=value", a))
			continue
		}
		if seen[name] != "" {
			errs = append(errs, fmt.Errorf("--%s is given twice; the last one wins", name))
		}
		seen[name] = "args"
	}
	for _, e := range c.Env {
		rest, ok := strings.CutPrefix(e.Name, "ROOMCAST_")
		if !ok {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		switch seen[name] {
		case "args":
			errs = append(errs, fmt.Errorf("%s is ignored: the flag --%s is also in args and flags win", e.Name, name))
		case "env":
			errs = append(errs, fmt.Errorf("%s is set twice", e.Name))
		}
		seen[name] = "env"
	}
	return errors.Join(errs...)
}

func checkListenAll(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	var errs []error
	for flagName, addr := range map[string]string{"addr": cfg.Addr, "admin-addr": cfg.AdminAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s=%s: %v", flagName, addr, err))
			continue
		}
		if host != "" && host != "0.0.0.0" && host != "::" {
			errs = append(errs, fmt.Errorf("--%s=%s: probes, the Service and Prometheus connect to the pod IP; listen on 0.0.0.0", flagName, addr))
		}
	}
	return errors.Join(errs...)
}

func checkContainerPorts(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	c, _ := d.container()
	public, err1 := addrPort(cfg.Addr)
	admin, err2 := addrPort(cfg.AdminAddr)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if public == admin {
		return fmt.Errorf("--addr and --admin-addr share port %d", public)
	}
	var errs []error
	var havePublic, haveAdmin bool
	for _, p := range c.Ports {
		switch p.ContainerPort {
		case public:
			havePublic = true
		case admin:
			haveAdmin = true
		default:
			errs = append(errs, fmt.Errorf("container port %d (%s) is neither --addr (%d) nor --admin-addr (%d)", p.ContainerPort, p.Name, public, admin))
		}
	}
	if !havePublic {
		errs = append(errs, fmt.Errorf("no container port for --addr (%d)", public))
	}
	if !haveAdmin {
		errs = append(errs, fmt.Errorf("no container port for --admin-addr (%d)", admin))
	}
	return errors.Join(errs...)
}

func checkReadiness(tree *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	return checkProbe(tree, d, "readiness", c.ReadinessProbe, "/readyz")
}

func checkLiveness(tree *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	return checkProbe(tree, d, "liveness", c.LivenessProbe, "/healthz")
}

func checkProbe(tree *deployTree, d *deployment, kind string, p *probe, path string) error {
	if p == nil || p.HTTPGet == nil {
		return fmt.Errorf("no %s httpGet probe", kind)
	}
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	public, err := addrPort(cfg.Addr)
	if err != nil {
		return err
	}
	var errs []error
	if p.HTTPGet.Path != path {
		errs = append(errs, fmt.Errorf("%s probe path %q, want %q", kind, p.HTTPGet.Path, path))
	}
	if s := p.HTTPGet.Scheme; s != "" && s != "HTTP" {
		errs = append(errs, fmt.Errorf("%s probe scheme %q: the gateway serves plain HTTP", kind, s))
	}
	port, err := d.resolvePort(p.HTTPGet.Port)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s probe: %v", kind, err))
	} else if port != public {
		errs = append(errs, fmt.Errorf("%s probe on port %d, want the public port %d (--addr)", kind, port, public))
	}
	return errors.Join(errs...)
}

func checkDrainOrder(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	if cfg.DrainDelay+cfg.DrainWindow >= cfg.DrainTimeout {
		return fmt.Errorf("--drain-delay %s + --drain-window %s = %s, not below --drain-timeout %s (the gateway refuses to start)",
			cfg.DrainDelay, cfg.DrainWindow, cfg.DrainDelay+cfg.DrainWindow, cfg.DrainTimeout)
	}
	return nil
}

func checkGracePeriod(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	c, _ := d.container()
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		h := c.Lifecycle.PreStop
		switch {
		case h.Sleep != nil:
			preStop = time.Duration(h.Sleep.Seconds) * time.Second
		default:
			return errors.New("preStop: only a sleep action can be budgeted (the image has no shell for an exec hook)")
		}
	}
	grace := defaultGracePeriod
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if need := preStop + cfg.DrainTimeout + shutdownMargin; grace < need {
		return fmt.Errorf("terminationGracePeriodSeconds %s < preStop %s + --drain-timeout %s + margin %s = %s: the pod would be killed mid-drain",
			grace, preStop, cfg.DrainTimeout, shutdownMargin, need)
	}
	return nil
}

func checkServices(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	public, err := addrPort(cfg.Addr)
	if err != nil {
		return err
	}
	var errs []error
	selected := 0
	for _, s := range tree.services {
		if len(s.Spec.Selector) == 0 {
			errs = append(errs, fmt.Errorf("%s: Service %s has no selector", s.source, s.Metadata.Name))
			continue
		}
		if !subset(s.Spec.Selector, d.Spec.Template.Metadata.Labels) {
			continue
		}
		selected++
		for _, p := range s.Spec.Ports {
			target := intOrString{Int: p.Port}
			if p.TargetPort != nil {
				target = *p.TargetPort
			}
			port, err := d.resolvePort(target)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: Service %s port %q: %v", s.source, s.Metadata.Name, p.Name, err))
			case port != public:
				errs = append(errs, fmt.Errorf("%s: Service %s port %q targets container port %d; only the public port %d (--addr) may be exposed", s.source, s.Metadata.Name, p.Name, port, public))
			}
		}
	}
	if selected == 0 {
		errs = append(errs, errors.New("no Service selects the gateway pods"))
	}
	return errors.Join(errs...)
}

func checkSelectors(tree *deployTree, d *deployment) error {
	labels := d.Spec.Template.Metadata.Labels
	var errs []error
	if len(d.Spec.Selector.MatchLabels) == 0 || len(d.Spec.Selector.MatchExpressions) > 0 {
		errs = append(errs, errors.New("the Deployment selector must be matchLabels only"))
	} else if !subset(d.Spec.Selector.MatchLabels, labels) {
		errs = append(errs, fmt.Errorf("the Deployment selector %v does not match its pod labels %v", d.Spec.Selector.MatchLabels, labels))
	}
	found := false
	for _, p := range tree.pdbs {
		if len(p.Spec.Selector.MatchExpressions) > 0 {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: use matchLabels only", p.Metadata.Name))
			continue
		}
		if len(p.Spec.Selector.MatchLabels) > 0 && subset(p.Spec.Selector.MatchLabels, labels) {
			found = true
			if (p.Spec.MaxUnavailable == nil) == (p.Spec.MinAvailable == nil) {
				errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: set exactly one of maxUnavailable and minAvailable", p.Metadata.Name))
			}
		}
	}
	if !found {
		errs = append(errs, fmt.Errorf("no PodDisruptionBudget selects the pod labels %v", labels))
	}
	return errors.Join(errs...)
}

func checkSecurity(tree *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil {
		pod = &securityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &securityContext{}
	}
	var errs []error
	nonRoot, uid := pod.RunAsNonRoot, pod.RunAsUser
	if sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if sc.RunAsUser != nil {
		uid = sc.RunAsUser
	}
	if nonRoot == nil || !*nonRoot {
		errs = append(errs, errors.New("runAsNonRoot is not true"))
	}
	imageUID, err := strconv.ParseInt(strings.Split(tree.image.User, ":")[0], 10, 64)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("Dockerfile USER %q is not numeric: runAsNonRoot cannot verify a user name", tree.image.User))
	case imageUID == 0:
		errs = append(errs, errors.New("Dockerfile USER is root"))
	case uid != nil && *uid != imageUID:
		errs = append(errs, fmt.Errorf("runAsUser %d differs from the image's USER %d", *uid, imageUID))
	}
	if uid != nil && *uid == 0 {
		errs = append(errs, errors.New("runAsUser is 0"))
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		errs = append(errs, errors.New("allowPrivilegeEscalation is not false"))
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		errs = append(errs, errors.New("readOnlyRootFilesystem is not true"))
	}
	if sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, errors.New("privileged"))
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		errs = append(errs, errors.New("capabilities must drop ALL and add none"))
	}
	return errors.Join(errs...)
}

func checkMemory(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	c, _ := d.container()
	limit, err := parseQuantity(c.Resources.Limits["memory"])
	if err != nil {
		return fmt.Errorf("limits.memory: %v", err)
	}
	var errs []error
	if req, err := parseQuantity(c.Resources.Requests["memory"]); err != nil {
		errs = append(errs, fmt.Errorf("requests.memory: %v", err))
	} else if req > limit {
		errs = append(errs, fmt.Errorf("requests.memory %d > limits.memory %d", req, limit))
	}
	if c.Resources.Requests["cpu"] == "" {
		errs = append(errs, errors.New("no CPU request"))
	}
	if cfg.MaxStreams <= 0 {
		errs = append(errs, errors.New("--max-streams is 0 (no cap): memory grows with every stream until the pod is OOM-killed"))
		return errors.Join(errs...)
	}
	need := int64(cfg.MaxStreams)*idleStreamBytes + baseBytes
	what := fmt.Sprintf("--max-streams %d x %d KiB + %d MiB", cfg.MaxStreams, idleStreamBytes>>10, baseBytes>>20)
	if cfg.Redis == "" {
		need += int64(cfg.MaxHistoryBytes)
		what += fmt.Sprintf(" + --max-history-bytes %d MiB (embedded log)", cfg.MaxHistoryBytes>>20)
	}
	if limit < need {
		errs = append(errs, fmt.Errorf("limits.memory %d MiB < %s = %d MiB", limit>>20, what, need>>20))
	}
	return errors.Join(errs...)
}

func checkGoMemLimit(_ *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	var v string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			v = e.Value
		}
	}
	if v == "" || v == "off" {
		return nil
	}
	soft, err := parseSize(strings.TrimSuffix(v, "TiB"))
	if err != nil {
		return fmt.Errorf("GOMEMLIMIT=%q: %v", v, err)
	}
	if strings.HasSuffix(v, "TiB") {
		soft <<= 40
	}
	limit, err := parseQuantity(c.Resources.Limits["memory"])
	if err != nil {
		return fmt.Errorf("limits.memory: %v", err)
	}
	if soft >= limit {
		return fmt.Errorf("GOMEMLIMIT %d MiB is not below limits.memory %d MiB", soft>>20, limit>>20)
	}
	return nil
}

func checkPublishToken(_ *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--publish-token") || strings.HasPrefix(a, "-publish-token") {
			errs = append(errs, errors.New("--publish-token in args: the token would be in the manifest; use ROOMCAST_PUBLISH_TOKEN from a Secret"))
		}
	}
	found := false
	for _, e := range c.Env {
		if e.Name != "ROOMCAST_PUBLISH_TOKEN" {
			continue
		}
		found = true
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name == "" {
			errs = append(errs, errors.New("ROOMCAST_PUBLISH_TOKEN must come from valueFrom.secretKeyRef, never a literal"))
		}
	}
	if !found {
		errs = append(errs, errors.New("no ROOMCAST_PUBLISH_TOKEN: without a token only loopback clients may publish, i.e. nobody outside the pod"))
	}
	return errors.Join(errs...)
}

func checkReplicasShareLog(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if replicas > 1 && cfg.Redis == "" {
		return fmt.Errorf("%d replicas without --redis: each pod would keep its own log and its own sequence", replicas)
	}
	return nil
}

func checkServiceLinks(_ *deployTree, d *deployment) error {
	if v := d.Spec.Template.Spec.EnableServiceLinks; v == nil || *v {
		return errors.New("enableServiceLinks is not false: Services named roomcast* inject ROOMCAST_* variables, the prefix of the flags' environment twins")
	}
	return nil
}

func checkPrometheus(tree *deployTree, d *deployment) error {
	a := d.Spec.Template.Metadata.Annotations
	if a["prometheus.io/scrape"] != "true" {
		return nil
	}
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	admin, err := addrPort(cfg.AdminAddr)
	if err != nil {
		return err
	}
	var errs []error
	if p := a["prometheus.io/port"]; p != strconv.Itoa(admin) {
		errs = append(errs, fmt.Errorf("prometheus.io/port %q, want the admin port %d (--admin-addr)", p, admin))
	}
	if p := a["prometheus.io/path"]; p != "" && p != "/metrics" {
		errs = append(errs, fmt.Errorf("prometheus.io/path %q, want /metrics", p))
	}
	return errors.Join(errs...)
}

const nginxIngress = "nginx.ingress.kubernetes.io/"

func checkIngresses(tree *deployTree, d *deployment) error {
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	public, err := addrPort(cfg.Addr)
	if err != nil {
		return err
	}
	var errs []error
	for _, ing := range tree.ingresses {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: Ingress %s: %s", ing.source, ing.Metadata.Name, fmt.Sprintf(format, args...)))
		}
		a := ing.Metadata.Annotations
		if v := a[nginxIngress+"proxy-buffering"]; v != "off" {
			fail("proxy-buffering %q, want off", v)
		}
		for _, k := range []string{"proxy-read-timeout", "proxy-send-timeout"} {
			v, ok := a[nginxIngress+k]
			if !ok {
				fail("no %s (ingress-nginx's default 60s would do, but say it)", k)
				continue
			}
			secs, err := strconv.Atoi(v)
			if err != nil {
				fail("%s %q: want whole seconds", k, v)
			} else if time.Duration(secs)*time.Second <= cfg.Heartbeat {
				fail("%s %ss is not above --heartbeat %s: idle streams would be cut", k, v, cfg.Heartbeat)
			}
		}
		if v := a[nginxIngress+"proxy-http-version"]; v != "" && v != "1.1" {
			fail("proxy-http-version %q, want 1.1", v)
		}
		batchOnly, paths := true, 0
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				paths++
				if p.Path != "/events" || p.PathType != "Exact" {
					batchOnly = false
				}
				if err := ingressBackend(tree, d, p.Backend, public); err != nil {
					fail("path %s: %v", p.Path, err)
				}
			}
		}
		if ing.Spec.DefaultBackend != nil {
			batchOnly = false
			if err := ingressBackend(tree, d, *ing.Spec.DefaultBackend, public); err != nil {
				fail("default backend: %v", err)
			}
		}
		if paths == 0 {
			batchOnly = false
		}
		want, flagName := int64(cfg.MaxBody), "--max-body"
		if batchOnly {
			want, flagName = int64(cfg.MaxBatchBody), "--max-batch-body"
		}
		if v := a[nginxIngress+"proxy-body-size"]; v == "" {
			fail("no proxy-body-size; want %s (%d bytes)", flagName, want)
		} else if n, err := parseNginxSize(v); err != nil {
			fail("proxy-body-size %q: %v", v, err)
		} else if n != want {
			fail("proxy-body-size %s = %d bytes, want %s = %d", v, n, flagName, want)
		}
	}
	return errors.Join(errs...)
}

func ingressBackend(tree *deployTree, d *deployment, b ingressBackendRef, public int) error {
	if b.Service == nil {
		return errors.New("no service backend")
	}
	for _, s := range tree.services {
		if s.Metadata.Name != b.Service.Name {
			continue
		}
		if !subset(s.Spec.Selector, d.Spec.Template.Metadata.Labels) || len(s.Spec.Selector) == 0 {
			return fmt.Errorf("Service %s does not select the gateway pods", s.Metadata.Name)
		}
		for _, p := range s.Spec.Ports {
			if (b.Service.Port.Name != "" && p.Name == b.Service.Port.Name) || (b.Service.Port.Number != 0 && p.Port == b.Service.Port.Number) {
				target := intOrString{Int: p.Port}
				if p.TargetPort != nil {
					target = *p.TargetPort
				}
				port, err := d.resolvePort(target)
				if err != nil {
					return err
				}
				if port != public {
					return fmt.Errorf("Service %s port %s reaches container port %d, not the public port %d", s.Metadata.Name, p.Name, port, public)
				}
				return nil
			}
		}
		return fmt.Errorf("Service %s has no port %+v", s.Metadata.Name, b.Service.Port)
	}
	return fmt.Errorf("no Service %q under deploy/", b.Service.Name)
}

func checkNginx(tree *deployTree, d *deployment) error {
	if tree.nginx == nil {
		return nil
	}
	cfg, err := d.config(tree)
	if err != nil {
		return err
	}
	server := tree.nginx.find("http", "server")
	if server == nil {
		return errors.New("nginx.conf: no server block")
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("nginx.conf: "+format, args...))
	}
	// inherited is a directive's value in a location, else in its server block.
	inherited := func(loc *nginxDirective, name string) []string {
		if x := loc.child(name); x != nil {
			return x.Args
		}
		if x := server.child(name); x != nil {
			return x.Args
		}
		return nil
	}
	checkLocation := func(where string, bodyFlag string, body int64, sse bool) {
		loc := tree.nginx.find("http", "server", "location "+where)
		if loc == nil {
			if sse {
				fail("no location %s", where)
			}
			return
		}
		if v := inherited(loc, "proxy_http_version"); !slices.Equal(v, []string{"1.1"}) {
			fail("location %s: proxy_http_version %q, want 1.1 (keep-alive to the gateway)", where, v)
		}
		// proxy_set_header is inherited only by a location that sets none itself.
		headers := loc
		if loc.child("proxy_set_header") == nil {
			headers = server
		}
		if !slices.ContainsFunc(headers.Children, func(x *nginxDirective) bool {
			return x.Name == "proxy_set_header" && len(x.Args) == 2 && strings.EqualFold(x.Args[0], "Connection") && x.Args[1] == ""
		}) {
			fail("location %s: no proxy_set_header Connection \"\" (keep-alive to the gateway)", where)
		}
		if sse {
			if v := inherited(loc, "proxy_buffering"); !slices.Equal(v, []string{"off"}) {
				fail("location %s: proxy_buffering %q, want off", where, v)
			}
		}
		for _, name := range []string{"proxy_read_timeout", "proxy_send_timeout"} {
			timeout := time.Minute // nginx's default
			if v := inherited(loc, name); len(v) == 1 {
				if timeout, err = parseNginxTime(v[0]); err != nil {
					fail("location %s: %s %q: %v", where, name, v[0], err)
					continue
				}
			}
			if timeout <= cfg.Heartbeat {
				fail("location %s: %s %s is not above --heartbeat %s", where, name, timeout, cfg.Heartbeat)
			}
		}
		v := inherited(loc, "client_max_body_size")
		if len(v) != 1 {
			fail("location %s: no client_max_body_size; want %s (%d bytes)", where, bodyFlag, body)
			return
		}
		if n, err := parseNginxSize(v[0]); err != nil {
			fail("location %s: client_max_body_size %q: %v", where, v[0], err)
		} else if n != body {
			fail("location %s: client_max_body_size %s = %d bytes, want %s = %d", where, v[0], n, bodyFlag, body)
		}
	}
	checkLocation("/rooms/", "--max-body", int64(cfg.MaxBody), true)
	checkLocation("= /events", "--max-batch-body", int64(cfg.MaxBatchBody), false)
	for _, up := range tree.nginx.findAll("http", "upstream") {
		if up.child("keepalive") == nil {
			fail("upstream %s: no keepalive", strings.Join(up.Args, " "))
		}
	}
	return errors.Join(errs...)
}

func checkKustomization(tree *deployTree, _ *deployment) error {
	var errs []error
	for _, k := range tree.kustomizations {
		dir := filepath.Dir(k.path)
		for _, r := range k.Resources {
			if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
				errs = append(errs, fmt.Errorf("%s: resource %s: %v", k.source, r, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ---- the manifests ----

type deployTree struct {
	deployments    []*deployment
	services       []*service
	pdbs           []*podDisruptionBudget
	ingresses      []*ingress
	kustomizations []*kustomization
	image          imageConfig
	nginx          *nginxDirective // deploy/nginx.conf, nil when absent
}

type objectMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type typeMeta struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	source     string     // file and document number, for messages
}

type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []json.RawMessage `json:"matchExpressions"`
}

type deployment struct {
	typeMeta
	Spec struct {
		Replicas *int32        `json:"replicas"`
		Selector labelSelector `json:"selector"`
		Template struct {
			Metadata objectMeta `json:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds *int64           `json:"terminationGracePeriodSeconds"`
				EnableServiceLinks            *bool            `json:"enableServiceLinks"`
				SecurityContext               *securityContext `json:"securityContext"`
				Containers                    []container      `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type container struct {
	Name           string            `json:"name"`
	Command        []string          `json:"command"`
	Args           []string          `json:"args"`
	Env            []envVar          `json:"env"`
	EnvFrom        []json.RawMessage `json:"envFrom"`
	Ports          []containerPort   `json:"ports"`
	ReadinessProbe *probe            `json:"readinessProbe"`
	LivenessProbe  *probe            `json:"livenessProbe"`
	Lifecycle      *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int64 `json:"seconds"`
			} `json:"sleep"`
			Exec    json.RawMessage `json:"exec"`
			HTTPGet json.RawMessage `json:"httpGet"`
		} `json:"preStop"`
	} `json:"lifecycle"`
	Resources struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	} `json:"resources"`
	SecurityContext *securityContext `json:"securityContext"`
}

type envVar struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `json:"name"`
			Key  string `json:"key"`
		} `json:"secretKeyRef"`
	} `json:"valueFrom"`
}

// value is what the variable holds in the pod; a Secret reference stands for a
// string from that Secret.
func (e envVar) value() string {
	if e.ValueFrom != nil {
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			return "secret-" + r.Name + "-" + r.Key
		}
		return "from-elsewhere"
	}
	return e.Value
}

type containerPort struct {
	Name          string `json:"name"`
	ContainerPort int    `json:"containerPort"`
}

type probe struct {
	HTTPGet *struct {
		Path   string      `json:"path"`
		Port   intOrString `json:"port"`
		Scheme string      `json:"scheme"`
	} `json:"httpGet"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `json:"runAsNonRoot"`
	RunAsUser                *int64 `json:"runAsUser"`
	AllowPrivilegeEscalation *bool  `json:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `json:"readOnlyRootFilesystem"`
	Privileged               *bool  `json:"privileged"`
	Capabilities             *struct {
		Drop []string `json:"drop"`
		Add  []string `json:"add"`
	} `json:"capabilities"`
}

type service struct {
	typeMeta
	Spec struct {
		Selector map[string]string `json:"selector"`
		Ports    []servicePort     `json:"ports"`
	} `json:"spec"`
}

type servicePort struct {
	Name       string       `json:"name"`
	Port       int          `json:"port"`
	TargetPort *intOrString `json:"targetPort"`
}

type podDisruptionBudget struct {
	typeMeta
	Spec struct {
		Selector       labelSelector `json:"selector"`
		MinAvailable   *intOrString  `json:"minAvailable"`
		MaxUnavailable *intOrString  `json:"maxUnavailable"`
	} `json:"spec"`
}

type ingress struct {
	typeMeta
	Spec struct {
		DefaultBackend *ingressBackendRef `json:"defaultBackend"`
		Rules          []struct {
			HTTP *struct {
				Paths []struct {
					Path     string            `json:"path"`
					PathType string            `json:"pathType"`
					Backend  ingressBackendRef `json:"backend"`
				} `json:"paths"`
			} `json:"http"`
		} `json:"rules"`
	} `json:"spec"`
}

type ingressBackendRef struct {
	Service *struct {
		Name string `json:"name"`
		Port struct {
			Name   string `json:"name"`
			Number int    `json:"number"`
		} `json:"port"`
	} `json:"service"`
}

type kustomization struct {
	typeMeta
	Resources []string `json:"resources"`
	path      string
}

// intOrString is a Kubernetes port reference: a number or a port name.
type intOrString struct {
	Int   int
	Str   string
	IsStr bool
}

func (v *intOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		v.IsStr = true
		return json.Unmarshal(b, &v.Str)
	}
	return json.Unmarshal(b, &v.Int)
}

// gateway is the gateway container (checks guard against its absence through
// container).
func (d *deployment) gateway() *container {
	c, _ := d.container()
	if c == nil {
		return &container{}
	}
	return c
}

func (d *deployment) container() (*container, error) {
	cs := d.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == "gateway" {
			return &cs[i], nil
		}
	}
	return nil, errors.New("no container named gateway")
}

// config is the gateway's effective configuration in the pod: the container's args,
// and its env over the image's ENV. When that does not parse (checkParses says so),
// it is the configuration without the settings that fail, so that the other checks
// still report their own findings.
func (d *deployment) config(tree *deployTree) (config, error) {
	c, err := d.container()
	if err != nil {
		return config{}, err
	}
	args, env := c.Args, d.env(tree)
	cfg, err := parseConfig(args, mapEnv(env), io.Discard)
	if err == nil {
		return cfg, nil
	}
	var good []string
	for _, a := range args {
		if _, err := parseConfig([]string{a}, noEnv, io.Discard); err == nil {
			good = append(good, a)
		}
	}
	for k, v := range env {
		if _, err := parseConfig(nil, mapEnv(map[string]string{k: v}), io.Discard); err != nil {
			delete(env, k)
		}
	}
	return parseConfig(good, mapEnv(env), io.Discard)
}

// strictConfig is config without the fallback.
func (d *deployment) strictConfig(tree *deployTree) (config, error) {
	c, err := d.container()
	if err != nil {
		return config{}, err
	}
	return parseConfig(c.Args, mapEnv(d.env(tree)), io.Discard)
}

// env is the container's environment: its env over the image's ENV.
func (d *deployment) env(tree *deployTree) map[string]string {
	env := map[string]string{}
	for _, kv := range tree.image.Env {
		env[kv[0]] = kv[1]
	}
	for _, e := range d.gateway().Env {
		env[e.Name] = e.value()
	}
	return env
}

func mapEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// resolvePort turns a port number or name into a container port number.
func (d *deployment) resolvePort(p intOrString) (int, error) {
	c, err := d.container()
	if err != nil {
		return 0, err
	}
	if !p.IsStr {
		return p.Int, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.Str {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.Str)
}

func mustLoadDeployTree(t *testing.T) *deployTree {
	t.Helper()
	tree, err := loadDeployTree(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func loadDeployTree(root string) (*deployTree, error) {
	tree := &deployTree{}
	dir := filepath.Join(root, "deploy")
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range splitYAML(string(data)) {
			if err := tree.add(path, i+1, []byte(doc)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if tree.image, err = loadImageConfig(filepath.Join(root, "Dockerfile")); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "nginx.conf"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if tree.nginx, err = parseNginx(string(data)); err != nil {
			return nil, fmt.Errorf("deploy/nginx.conf: %v", err)
		}
	}
	return tree, nil
}

// splitYAML splits a multi-document YAML file and drops documents without content.
func splitYAML(s string) []string {
	var docs []string
	var cur strings.Builder
	flush := func() {
		for _, line := range strings.Split(cur.String(), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				docs = append(docs, cur.String())
				break
			}
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

func (tree *deployTree) add(path string, n int, doc []byte) error {
	name := path
	if rel, err := filepath.Rel(repoRoot, path); err == nil {
		name = rel
	}
	source := fmt.Sprintf("%s (document %d)", filepath.ToSlash(name), n)
	var tm typeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("%s: %v", source, err)
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return fmt.Errorf("%s: no kind or apiVersion", source)
	}
	var target any
	switch tm.Kind {
	case "Deployment":
		d := &deployment{}
		tree.deployments, target = append(tree.deployments, d), d
	case "Service":
		s := &service{}
		tree.services, target = append(tree.services, s), s
	case "PodDisruptionBudget":
		p := &podDisruptionBudget{}
		tree.pdbs, target = append(tree.pdbs, p), p
	case "Ingress":
		i := &ingress{}
		tree.ingresses, target = append(tree.ingresses, i), i
	case "Kustomization":
		k := &kustomization{path: path}
		tree.kustomizations, target = append(tree.kustomizations, k), k
	default:
		return fmt.Errorf("%s: no drift checks for kind %s: teach cmd/gateway/deploy_test.go what to check", source, tm.Kind)
	}
	if err := yaml.Unmarshal(doc, target); err != nil {
		return fmt.Errorf("%s: %v", source, err)
	}
	// Set the source on the embedded typeMeta (json ignores the unexported field).
	switch o := target.(type) {
	case *deployment:
		o.source = source
	case *service:
		o.source = source
	case *podDisruptionBudget:
		o.source = source
	case *ingress:
		o.source = source
	case *kustomization:
		o.source = source
	}
	return nil
}

// ---- the Dockerfile ----

// imageConfig is what the final stage of the Dockerfile sets.
type imageConfig struct {
	Entrypoint []string
	Env        [][2]string
	User       string
}

func loadImageConfig(path string) (imageConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return imageConfig{}, err
	}
	var img imageConfig
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			img = imageConfig{} // only the final stage counts
		case "ENV":
			fields := strings.Fields(rest)
			if len(fields) > 0 && !strings.Contains(fields[0], "=") {
				img.Env = append(img.Env, [2]string{fields[0], strings.TrimSpace(strings.TrimPrefix(rest, fields[0]))})
				continue
			}
			for _, f := range fields {
				k, v, _ := strings.Cut(f, "=")
				if u, err := strconv.Unquote(v); err == nil {
					v = u
				}
				img.Env = append(img.Env, [2]string{k, v})
			}
		case "USER":
			img.User = rest
		case "ENTRYPOINT":
			img.Entrypoint = nil
			if err := json.Unmarshal([]byte(rest), &img.Entrypoint); err != nil {
				img.Entrypoint = nil // shell form: not comparable, and not used here
			}
		}
	}
	return img, nil
}

// ---- nginx.conf ----

// nginxDirective is one directive of an nginx configuration, with its block.
type nginxDirective struct {
	Name     string
	Args     []string
	Children []*nginxDirective
}

// parseNginx parses nginx configuration syntax; the top level is treated as the
// inside of an http block (the file is included from one).
func parseNginx(s string) (*nginxDirective, error) {
	toks, err := nginxTokens(s)
	if err != nil {
		return nil, err
	}
	root := &nginxDirective{Name: "http"}
	rest, err := root.parseBlock(toks, true)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("unexpected %q", rest[0])
	}
	return &nginxDirective{Children: []*nginxDirective{root}}, nil
}

func (d *nginxDirective) parseBlock(toks []string, top bool) ([]string, error) {
	for len(toks) > 0 {
		if toks[0] == "}" {
			if top {
				return nil, errors.New("unbalanced }")
			}
			return toks[1:], nil
		}
		x := &nginxDirective{Name: toks[0]}
		toks = toks[1:]
		for len(toks) > 0 && toks[0] != ";" && toks[0] != "{" && toks[0] != "}" {
			x.Args = append(x.Args, toks[0])
			toks = toks[1:]
		}
		if len(toks) == 0 {
			return nil, fmt.Errorf("directive %s is not terminated", x.Name)
		}
		switch toks[0] {
		case ";":
			toks = toks[1:]
		case "{":
			var err error
			if toks, err = x.parseBlock(toks[1:], false); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("directive %s is not terminated", x.Name)
		}
		d.Children = append(d.Children, x)
	}
	if !top {
		return nil, errors.New("unbalanced {")
	}
	return nil, nil
}

func nginxTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';':
			toks = append(toks, string(c))
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, errors.New("unterminated quote")
			}
			toks = append(toks, s[i+1:i+1+j])
			i += j + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n{};", rune(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

// child is the first directive of that name directly in d's block.
func (d *nginxDirective) child(name string) *nginxDirective {
	for _, c := range d.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// find follows a path of "name [args...]" steps, e.g. "location /rooms/".
func (d *nginxDirective) find(path ...string) *nginxDirective {
	all := d.findAll(path...)
	if len(all) == 0 {
		return nil
	}
	return all[0]
}

func (d *nginxDirective) findAll(path ...string) []*nginxDirective {
	cur := []*nginxDirective{d}
	for _, step := range path {
		want := strings.Fields(step)
		var next []*nginxDirective
		for _, x := range cur {
			for _, c := range x.Children {
				if c.Name == want[0] && (len(want) == 1 || slices.Equal(c.Args, want[1:])) {
					next = append(next, c)
				}
			}
		}
		cur = next
	}
	return cur
}

// parseNginxSize parses an nginx size: bytes, or k/K, m/M, g/G (powers of 1024).
func parseNginxSize(s string) (int64, error) {
	mult := int64(1)
	switch strings.ToLower(s[len(s)-1:]) {
	case "k":
		mult = 1 << 10
	case "m":
		mult = 1 << 20
	case "g":
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not an nginx size")
	}
	return n * mult, nil
}

// parseNginxTime parses an nginx time: seconds, or a number with ms, s, m, h or d.
func parseNginxTime(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	if strings.HasSuffix(s, "d") {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		if err != nil {
			return 0, err
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// parseQuantity parses a Kubernetes memory quantity in bytes: a number with an
// optional binary (Ki, Mi, Gi, Ti) or decimal (k, M, G, T) suffix.
func parseQuantity(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("not set")
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	mult := 1.0
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("quantity %q: want a number with Ki, Mi, Gi, k, M or G", s)
	}
	return int64(f * mult), nil
}

// ---- helpers ----

func noEnv(string) string { return "" }

func addrPort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// setArg replaces --name=… in c's args, or appends it.
func setArg(c *container, name, value string) {
	arg := "--" + name + "=" + value
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--"+name+"=") {
			c.Args[i] = arg
			return
		}
	}
	c.Args = append(c.Args, arg)
}

// setEnv replaces c's variable name by a literal value, or appends it.
func setEnv(c *container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = envVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, envVar{Name: name, Value: value})
}

func ptr[T any](v T) *T { return &v }
