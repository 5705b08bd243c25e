package deploy_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// idleStreamBytes is the gateway's resident memory per idle stream (cmd/loadgen
	// -idle at 19,000 streams: 37 to 39.6 KiB per connection).
	idleStreamBytes = 38 << 10
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

// checkStarts starts the binary with the pod's args and env: a flag it does not
// know, a value it refuses, or flags that contradict each other (the drain order
// among them) keep it from starting.
func checkStarts(tree *deployTree, d *deployment) error {
	_, err := d.run(tree)
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
	for _, kv := range d.env(tree) {
		name := kv[0]
		rest, ok := strings.CutPrefix(name, "ROOMCAST_")
		if !ok {
			continue
		}
		flagName, err := flagOfEnv(name)
		if err != nil {
			return err
		}
		if flagName == "" {
			errs = append(errs, fmt.Errorf("%s: the binary has no flag --%s, so the gateway ignores it (twins are ROOMCAST_ and the flag in capitals with underscores)",
				name, strings.ToLower(strings.ReplaceAll(rest, "_", "-"))))
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
	var errs []error
	for _, flagName := range []string{"addr", "admin-addr"} {
		addr, err := d.raw(tree, flagName)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s=%s: %w", flagName, addr, err))
			continue
		}
		if host != "" && host != "0.0.0.0" && host != "::" {
			errs = append(errs, fmt.Errorf("--%s=%s: probes, the Service and Prometheus connect to the pod IP; listen on 0.0.0.0", flagName, addr))
		}
	}
	return errors.Join(errs...)
}

func checkContainerPorts(tree *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	public, err1 := d.port(tree, "addr")
	admin, err2 := d.port(tree, "admin-addr")
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

func checkProbe(tree *deployTree, d *deployment, kind string, p *corev1.Probe, path string) error {
	if p == nil || p.HTTPGet == nil {
		return fmt.Errorf("no %s httpGet probe", kind)
	}
	public, err := d.port(tree, "addr")
	if err != nil {
		return err
	}
	var errs []error
	if p.HTTPGet.Path != path {
		errs = append(errs, fmt.Errorf("%s probe path %q, want %q", kind, p.HTTPGet.Path, path))
	}
	if s := p.HTTPGet.Scheme; s != "" && s != corev1.URISchemeHTTP {
		errs = append(errs, fmt.Errorf("%s probe scheme %q: the gateway serves plain HTTP", kind, s))
	}
	port, err := d.resolvePort(p.HTTPGet.Port)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s probe: %w", kind, err))
	} else if port != public {
		errs = append(errs, fmt.Errorf("%s probe on port %d, want the public port %d (--addr)", kind, port, public))
	}
	return errors.Join(errs...)
}

// checkDrainOrder restates one of the binary's own rules so that a broken drain order
// is named as such (checkStarts fails too, with the binary's message).
func checkDrainOrder(tree *deployTree, d *deployment) error {
	r, err := d.run(tree)
	if err != nil {
		return err
	}
	delay, err1 := r.duration("drain_delay")
	window, err2 := r.duration("drain_window")
	timeout, err3 := r.duration("drain_timeout")
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	if delay+window >= timeout {
		return fmt.Errorf("--drain-delay %s + --drain-window %s = %s, not below --drain-timeout %s", delay, window, delay+window, timeout)
	}
	return nil
}

func checkGracePeriod(tree *deployTree, d *deployment) error {
	r, err := d.run(tree)
	if err != nil {
		return err
	}
	timeout, err := r.duration("drain_timeout")
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
	if need := preStop + timeout + shutdownMargin; grace < need {
		return fmt.Errorf("terminationGracePeriodSeconds %s < preStop %s + --drain-timeout %s + margin %s = %s: the pod would be killed mid-drain",
			grace, preStop, timeout, shutdownMargin, need)
	}
	return nil
}

func checkServices(tree *deployTree, d *deployment) error {
	public, err := d.port(tree, "addr")
	if err != nil {
		return err
	}
	var errs []error
	selected := 0
	for _, s := range tree.services {
		if len(s.Spec.Selector) == 0 {
			errs = append(errs, fmt.Errorf("%s: Service %s has no selector", s.source.source, s.Name))
			continue
		}
		if !subset(s.Spec.Selector, d.Spec.Template.Labels) {
			continue
		}
		selected++
		for _, p := range s.Spec.Ports {
			port, err := d.resolvePort(targetPort(p))
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: Service %s port %q: %w", s.source.source, s.Name, p.Name, err))
			case port != public:
				errs = append(errs, fmt.Errorf("%s: Service %s port %q targets container port %d; only the public port %d (--addr) may be exposed", s.source.source, s.Name, p.Name, port, public))
			}
		}
	}
	if selected == 0 {
		errs = append(errs, errors.New("no Service selects the gateway pods"))
	}
	return errors.Join(errs...)
}

// targetPort is a Service port's target; Kubernetes defaults it to the port.
func targetPort(p corev1.ServicePort) intstr.IntOrString {
	if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0 {
		return intstr.FromInt32(p.Port)
	}
	return p.TargetPort
}

func checkSelectors(tree *deployTree, d *deployment) error {
	labels := d.Spec.Template.Labels
	var errs []error
	if sel := d.Spec.Selector; sel == nil || len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) > 0 {
		errs = append(errs, errors.New("the Deployment selector must be matchLabels only"))
	} else if !subset(sel.MatchLabels, labels) {
		errs = append(errs, fmt.Errorf("the Deployment selector %v does not match its pod labels %v", sel.MatchLabels, labels))
	}
	found := false
	for _, p := range tree.pdbs {
		sel := p.Spec.Selector
		if sel == nil {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: no selector", p.Name))
			continue
		}
		if len(sel.MatchExpressions) > 0 {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: use matchLabels only", p.Name))
			continue
		}
		if len(sel.MatchLabels) > 0 && subset(sel.MatchLabels, labels) {
			found = true
			if (p.Spec.MaxUnavailable == nil) == (p.Spec.MinAvailable == nil) {
				errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: set exactly one of maxUnavailable and minAvailable", p.Name))
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
		pod = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
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

// memoryLimit is the container's memory limit in bytes.
func memoryLimit(c *corev1.Container) (int64, error) {
	q, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return 0, errors.New("no limits.memory")
	}
	return q.Value(), nil
}

func checkMemory(tree *deployTree, d *deployment) error {
	r, err := d.run(tree)
	if err != nil {
		return err
	}
	c, _ := d.container()
	limit, err := memoryLimit(c)
	if err != nil {
		return err
	}
	var errs []error
	if req, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
		errs = append(errs, errors.New("no requests.memory"))
	} else if req.Value() > limit {
		errs = append(errs, fmt.Errorf("requests.memory %s > limits.memory %d", req.String(), limit))
	}
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
		errs = append(errs, errors.New("no CPU request"))
	}
	maxStreams, err1 := r.number("max_streams")
	kind, err2 := r.str("log")
	if err := errors.Join(err1, err2); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if maxStreams <= 0 {
		errs = append(errs, errors.New("--max-streams is 0 (no cap): memory grows with every stream until the pod is OOM-killed"))
		return errors.Join(errs...)
	}
	recent, err1 := r.number("recent_bytes")
	queued, err2 := r.number("max_queued_bytes")
	if err := errors.Join(err1, err2); err != nil {
		return errors.Join(append(errs, err)...)
	}
	need := maxStreams*idleStreamBytes + baseBytes + recent + queued
	what := fmt.Sprintf("--max-streams %d x %d KiB + %d MiB + --recent-bytes %d MiB + --max-queued-bytes %d MiB",
		maxStreams, idleStreamBytes>>10, baseBytes>>20, recent>>20, queued>>20)
	if kind != "redis" {
		history, err := r.number("max_history_bytes")
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		need += history
		what += fmt.Sprintf(" + --max-history-bytes %d MiB (embedded log)", history>>20)
	}
	if limit < need {
		errs = append(errs, fmt.Errorf("limits.memory %d MiB < %s = %d MiB", limit>>20, what, need>>20))
	}
	return errors.Join(errs...)
}

// checkGoMemLimit compares GOMEMLIMIT as the Go runtime of the started binary read it
// (go_gc_gomemlimit_bytes) with the memory limit.
func checkGoMemLimit(tree *deployTree, d *deployment) error {
	r, err := d.run(tree)
	if err != nil {
		return err
	}
	c, _ := d.container()
	set := slices.ContainsFunc(d.env(tree), func(kv [2]string) bool { return kv[0] == "GOMEMLIMIT" && kv[1] != "off" })
	if !set {
		return nil
	}
	if r.goMemLimit <= 0 {
		return errors.New("GOMEMLIMIT is set but the gateway's metrics have no go_gc_gomemlimit_bytes")
	}
	limit, err := memoryLimit(c)
	if err != nil {
		return err
	}
	if int64(r.goMemLimit) >= limit {
		return fmt.Errorf("GOMEMLIMIT %d MiB is not below limits.memory %d MiB", int64(r.goMemLimit)>>20, limit>>20)
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
		if strings.HasPrefix(a, "--publish-token=") || strings.HasPrefix(a, "-publish-token=") {
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
	r, err := d.run(tree)
	if err != nil {
		return err
	}
	kind, err := r.str("log")
	if err != nil {
		return err
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if replicas > 1 && kind != "redis" {
		return fmt.Errorf("%d replicas on the %s log (no --redis): each pod would keep its own log and its own sequence", replicas, kind)
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
	a := d.Spec.Template.Annotations
	if a["prometheus.io/scrape"] != "true" {
		return nil
	}
	admin, err := d.port(tree, "admin-addr")
	if err != nil {
		return err
	}
	var errs []error
	if p := a["prometheus.io/port"]; p != strconv.Itoa(int(admin)) {
		errs = append(errs, fmt.Errorf("prometheus.io/port %q, want the admin port %d (--admin-addr)", p, admin))
	}
	if p := a["prometheus.io/path"]; p != "" && p != "/metrics" {
		errs = append(errs, fmt.Errorf("prometheus.io/path %q, want /metrics", p))
	}
	return errors.Join(errs...)
}

func checkKustomization(tree *deployTree, _ *deployment) error {
	var errs []error
	for _, k := range tree.kustomizations {
		dir := filepath.Dir(k.path)
		for _, r := range k.Resources {
			if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
				errs = append(errs, fmt.Errorf("%s: resource %s: %w", k.source.source, r, err))
			}
		}
	}
	return errors.Join(errs...)
}
