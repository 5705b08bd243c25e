package deploy_test

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type networkPolicy struct {
	networkingv1.NetworkPolicy
	source
}

// policies are the NetworkPolicies that select the gateway pods.
func (tree *deployTree) policies(d *deployment) []*networkPolicy {
	var out []*networkPolicy
	for _, np := range tree.networkPolicies {
		if subset(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) && len(np.Spec.PodSelector.MatchExpressions) == 0 {
			out = append(out, np)
		}
	}
	return out
}

// policyPort is a NetworkPolicy port resolved to a container port number; 0 when the
// entry names no port (every port).
func (d *deployment) policyPort(p networkingv1.NetworkPolicyPort) (int32, error) {
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
		return 0, fmt.Errorf("port %v: protocol %s; the listeners are TCP", p.Port, *p.Protocol)
	}
	if p.Port == nil {
		return 0, nil
	}
	if p.EndPort != nil {
		return 0, fmt.Errorf("port range %v-%d: admit the listeners' ports one by one", p.Port, *p.EndPort)
	}
	port, err := d.resolvePort(*p.Port)
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(d.gateway().Ports, func(c corev1.ContainerPort) bool { return c.ContainerPort == port }) {
		return 0, fmt.Errorf("port %d: the container declares no such port", port)
	}
	return port, nil
}

// restrictedPeer reports whether a peer names namespaces by label (an empty
// namespaceSelector is every namespace, an ipBlock is anything on the network).
func restrictedPeer(p networkingv1.NetworkPolicyPeer) bool {
	return p.IPBlock == nil && p.NamespaceSelector != nil &&
		(len(p.NamespaceSelector.MatchLabels) > 0 || len(p.NamespaceSelector.MatchExpressions) > 0)
}

// checkNetworkPolicy: the NetworkPolicies that select the pods admit the public port
// (--addr) from anywhere and the admin port (--admin-addr) only from namespaces
// named by label, admit no other port, and let the pods reach DNS and the --redis
// seeds' port.
func checkNetworkPolicy(tree *deployTree, d *deployment) error {
	public, err1 := d.port(tree, "addr")
	admin, err2 := d.port(tree, "admin-addr")
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	policies := tree.policies(d)
	if len(policies) == 0 {
		return errors.New("no NetworkPolicy selects the gateway pods: the admin listener is open to every pod of the cluster")
	}
	var errs []error
	var publicOpen, adminAdmitted, ingressPolicy, egressPolicy bool
	var egress []networkingv1.NetworkPolicyEgressRule
	for _, np := range policies {
		where := np.source.source + ": NetworkPolicy " + np.Name
		ingressPolicy = ingressPolicy || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		egressPolicy = egressPolicy || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		egress = append(egress, np.Spec.Egress...)
		for i, rule := range np.Spec.Ingress {
			fromAnywhere := len(rule.From) == 0
			if len(rule.Ports) == 0 {
				errs = append(errs, fmt.Errorf("%s: ingress rule %d names no port, so it admits the admin port (%d) too", where, i+1, admin))
				continue
			}
			for _, p := range rule.Ports {
				port, err := d.policyPort(p)
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("%s: ingress rule %d: %w", where, i+1, err))
				case port == public:
					publicOpen = publicOpen || fromAnywhere
				case port == admin:
					adminAdmitted = true
					if fromAnywhere {
						errs = append(errs, fmt.Errorf("%s: ingress rule %d admits the admin port %d (--admin-addr) from anywhere", where, i+1, admin))
					}
					for _, peer := range rule.From {
						if !restrictedPeer(peer) {
							errs = append(errs, fmt.Errorf("%s: ingress rule %d admits the admin port %d from a peer not limited to labelled namespaces", where, i+1, admin))
						}
					}
				default:
					errs = append(errs, fmt.Errorf("%s: ingress rule %d admits port %v (container port %d), which is neither --addr (%d) nor --admin-addr (%d)",
						where, i+1, p.Port, port, public, admin))
				}
			}
		}
	}
	if !ingressPolicy {
		errs = append(errs, errors.New("no NetworkPolicy of the pods has policyTypes Ingress"))
	}
	if !publicOpen {
		errs = append(errs, fmt.Errorf("no ingress rule admits the public port %d (--addr) from anywhere: the ingress controller and the kubelet's probes need it", public))
	}
	if !adminAdmitted {
		errs = append(errs, fmt.Errorf("no ingress rule admits the admin port %d (--admin-addr): Prometheus cannot scrape /metrics", admin))
	}
	if !egressPolicy {
		errs = append(errs, errors.New("no NetworkPolicy of the pods has policyTypes Egress"))
	}
	for _, need := range egressNeeds(tree, d, &errs) {
		if !egressAdmits(egress, need.port, need.protocol) {
			errs = append(errs, fmt.Errorf("no egress rule admits %s port %d (%s)", need.protocol, need.port, need.what))
		}
	}
	return errors.Join(errs...)
}

type egressNeed struct {
	what     string
	port     int32
	protocol corev1.Protocol
}

// egressNeeds are the ports the pods must reach: DNS, and every --redis seed's port.
func egressNeeds(tree *deployTree, d *deployment, errs *[]error) []egressNeed {
	needs := []egressNeed{{"DNS", 53, corev1.ProtocolUDP}, {"DNS", 53, corev1.ProtocolTCP}}
	redis, err := d.raw(tree, "redis")
	if err != nil {
		*errs = append(*errs, err)
		return needs
	}
	for _, seed := range strings.Split(redis, ",") {
		seed = strings.TrimSpace(seed)
		if seed == "" {
			continue
		}
		if !strings.Contains(seed, "://") {
			seed = "redis://" + seed
		}
		u, err := url.Parse(seed)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("--redis seed: %w", err))
			continue
		}
		_, p, err := net.SplitHostPort(u.Host)
		n, err2 := strconv.ParseInt(p, 10, 32)
		if err != nil || err2 != nil {
			*errs = append(*errs, fmt.Errorf("--redis seed %s: no port", u.Host))
			continue
		}
		needs = append(needs, egressNeed{"Redis, --redis " + u.Host, int32(n), corev1.ProtocolTCP})
	}
	return needs
}

// egressAdmits reports whether some rule lets the pods reach port over protocol.
func egressAdmits(rules []networkingv1.NetworkPolicyEgressRule, port int32, protocol corev1.Protocol) bool {
	for _, r := range rules {
		if len(r.Ports) == 0 {
			return true
		}
		for _, p := range r.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if proto != protocol {
				continue
			}
			if p.Port == nil || p.Port.Type == intstr.Int && (p.Port.IntVal == port || p.EndPort != nil && p.Port.IntVal <= port && port <= *p.EndPort) {
				return true
			}
		}
	}
	return false
}

// adminTokenPath is where --admin-token-file points in the pod.
func (d *deployment) adminTokenPath() string {
	for _, a := range d.gateway().Args {
		if v, ok := strings.CutPrefix(a, "--admin-token-file="); ok {
			return v
		}
	}
	for _, e := range d.gateway().Env {
		if e.Name == envName("admin-token-file") {
			return e.Value
		}
	}
	return ""
}

// secretFile is the Secret volume, and the key within it, that a path in the
// container reads; ok is false when no Secret volume is mounted there.
func (d *deployment) secretFile(p string) (vol *corev1.Volume, mount *corev1.VolumeMount, key string, ok bool) {
	c := d.gateway()
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		rel, found := strings.CutPrefix(path.Clean(p), path.Clean(m.MountPath)+"/")
		if !found || m.SubPath != "" {
			continue
		}
		for j := range d.Spec.Template.Spec.Volumes {
			v := &d.Spec.Template.Spec.Volumes[j]
			if v.Name == m.Name && v.Secret != nil {
				return v, m, rel, true
			}
		}
	}
	return nil, nil, "", false
}

// checkAdminToken: the admin listener asks for a token, read from a file that a
// read-only Secret volume provides; the token itself is never in the manifest.
func checkAdminToken(_ *deployTree, d *deployment) error {
	c, err := d.container()
	if err != nil {
		return err
	}
	for _, e := range c.Env {
		if e.Name == "ROOMCAST_ADMIN_TOKEN" {
			return errors.New("ROOMCAST_ADMIN_TOKEN: the admin token is read from a file only (--admin-token-file)")
		}
	}
	p := d.adminTokenPath()
	if p == "" {
		return errors.New("no --admin-token-file: /admin/drain, /admin/shed and pprof are open to whatever reaches the admin port")
	}
	vol, mount, key, ok := d.secretFile(p)
	if !ok {
		return fmt.Errorf("--admin-token-file=%s: no Secret volume is mounted there", p)
	}
	var errs []error
	if !mount.ReadOnly {
		errs = append(errs, fmt.Errorf("volumeMount %s: not readOnly", mount.Name))
	}
	if vol.Secret.SecretName == "" {
		errs = append(errs, fmt.Errorf("volume %s: no secretName", vol.Name))
	}
	if items := vol.Secret.Items; len(items) > 0 && !slices.ContainsFunc(items, func(k corev1.KeyToPath) bool { return k.Path == key }) {
		errs = append(errs, fmt.Errorf("volume %s: no item has path %s", vol.Name, key))
	}
	return errors.Join(errs...)
}

// TestNetworkPolicyFollowsTheListeners breaks, in memory, one side at a time (the
// policy, the flags, the container ports, the Redis seeds) and requires the check to
// fail: a port changed on one side only is caught.
func TestNetworkPolicyFollowsTheListeners(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(n int32) *intstr.IntOrString { p := intstr.FromInt32(n); return &p }
	breakages := map[string]func(*testing.T, *deployTree, *deployment){
		"policy admits another admin port": func(t *testing.T, tree *deployTree, d *deployment) {
			rule := adminRule(t, tree, d)
			rule.Ports[0].Port = port(9091)
		},
		"policy admits the public port elsewhere": func(t *testing.T, tree *deployTree, d *deployment) {
			np := tree.policies(d)[0]
			np.Spec.Ingress[0].Ports[0].Port = port(8081)
		},
		"--admin-addr moves": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "admin-addr", "0.0.0.0:9091")
		},
		"--addr moves": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "addr", "0.0.0.0:8081")
		},
		"admin container port moves": func(_ *testing.T, _ *deployTree, d *deployment) {
			for i, p := range d.gateway().Ports {
				if p.Name == "admin" {
					d.gateway().Ports[i].ContainerPort = 9091
				}
			}
		},
		"admin port from anywhere": func(t *testing.T, tree *deployTree, d *deployment) {
			adminRule(t, tree, d).From = nil
		},
		"admin port from every namespace": func(t *testing.T, tree *deployTree, d *deployment) {
			rule := adminRule(t, tree, d)
			rule.From[0].NamespaceSelector.MatchLabels = nil
		},
		"admin port from an address block": func(t *testing.T, tree *deployTree, d *deployment) {
			rule := adminRule(t, tree, d)
			rule.From = append(rule.From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
		},
		"a rule without ports": func(t *testing.T, tree *deployTree, d *deployment) {
			np := tree.policies(d)[0]
			np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: adminRule(t, tree, d).From})
		},
		"another port admitted": func(t *testing.T, tree *deployTree, d *deployment) {
			rule := adminRule(t, tree, d)
			rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: port(6060)})
		},
		"no DNS over UDP": func(t *testing.T, tree *deployTree, d *deployment) {
			np := tree.policies(d)[0]
			for i := range np.Spec.Egress {
				np.Spec.Egress[i].Ports = slices.DeleteFunc(np.Spec.Egress[i].Ports, func(p networkingv1.NetworkPolicyPort) bool {
					return p.Protocol != nil && *p.Protocol == udp
				})
			}
		},
		"Redis seeds on another port": func(_ *testing.T, _ *deployTree, d *deployment) {
			setEnv(d.gateway(), "ROOMCAST_REDIS", "redis-0.redis.redis.svc.cluster.local:7000")
		},
		"no egress policy type": func(t *testing.T, tree *deployTree, d *deployment) {
			np := tree.policies(d)[0]
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		},
		"policy selects other pods": func(t *testing.T, tree *deployTree, d *deployment) {
			tree.policies(d)[0].Spec.PodSelector.MatchLabels = map[string]string{"app": "someone-else"}
		},
	}
	for name, brk := range breakages {
		t.Run(name, func(t *testing.T) {
			tree := mustLoadDeployTree(t)
			if len(tree.deployments) == 0 {
				t.Fatal("no Deployment under deploy/")
			}
			d := tree.deployments[0]
			if err := checkNetworkPolicy(tree, d); err != nil {
				t.Fatalf("fails before any breakage: %v", err)
			}
			if len(tree.policies(d)) == 0 {
				t.Fatal("no NetworkPolicy to break")
			}
			brk(t, tree, d)
			err := checkNetworkPolicy(tree, d)
			if err == nil {
				t.Fatal("still passes after the breakage")
			}
			t.Logf("fails as it should: %v", err)
		})
	}
}

// adminRule is the ingress rule of the pods' first NetworkPolicy that admits the
// admin port.
func adminRule(t *testing.T, tree *deployTree, d *deployment) *networkingv1.NetworkPolicyIngressRule {
	t.Helper()
	admin, err := d.port(tree, "admin-addr")
	if err != nil {
		t.Fatal(err)
	}
	np := tree.policies(d)[0]
	for i := range np.Spec.Ingress {
		for _, p := range np.Spec.Ingress[i].Ports {
			if n, err := d.policyPort(p); err == nil && n == admin && len(np.Spec.Ingress[i].From) > 0 {
				return &np.Spec.Ingress[i]
			}
		}
	}
	t.Fatal("no ingress rule admits the admin port")
	return nil
}
