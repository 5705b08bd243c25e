package deploy_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// deployCheck is one rule the deployment examples must follow.
type deployCheck struct {
	name  string
	check func(*deployTree, *deployment) error
	// nginx marks the checks that run nginx: without it they are skipped, or fail
	// under CI=true.
	nginx bool
}

var deployChecks = []deployCheck{
	{name: "container runs the image entrypoint", check: checkEntrypoint},
	{name: "the binary starts with the args and env", check: checkStarts},
	{name: "every ROOMCAST_ variable is a flag's twin", check: checkEnvNames},
	{name: "args are --name=value, each flag once, none also in env", check: checkArgsForm},
	{name: "listeners bind all interfaces", check: checkListenAll},
	{name: "container ports match --addr and --admin-addr", check: checkContainerPorts},
	{name: "readiness probe is GET /readyz on the public port", check: checkReadiness},
	{name: "liveness probe is GET /healthz on the public port", check: checkLiveness},
	{name: "drain delay + window < drain timeout", check: checkDrainOrder},
	{name: "grace period > preStop + drain timeout + margin", check: checkGracePeriod},
	{name: "services expose the public port only", check: checkServices},
	{name: "selectors match the pod labels", check: checkSelectors},
	{name: "non-root, read-only, no privileges", check: checkSecurity},
	{name: "memory limit holds --max-streams idle streams", check: checkMemory},
	{name: "GOMEMLIMIT below the memory limit", check: checkGoMemLimit},
	{name: "publish token comes from a Secret", check: checkPublishToken},
	{name: "admin token is a file from a Secret", check: checkAdminToken},
	{name: "NetworkPolicy admits the listeners' ports and reaches DNS and Redis", check: checkNetworkPolicy},
	{name: "several replicas share a Redis log", check: checkReplicasShareLog},
	{name: "service links are off", check: checkServiceLinks},
	{name: "Prometheus scrapes the admin port", check: checkPrometheus},
	{name: "ingresses route to the public port with SSE settings", check: checkIngresses},
	{name: "pods answer the ingresses' hosts (--public-host) and their pod IP", check: checkServedHosts},
	{name: "the ingress controller's room key is nginx.conf's", check: checkRoomKeyMaps},
	{name: "ingress body limits are the flags' as nginx reads them", check: checkIngressBodySize, nginx: true},
	{name: "nginx accepts nginx.conf", check: checkNginx, nginx: true},
	{name: "nginx.conf body limits are the flags' as nginx reads them", check: checkNginxBodySize, nginx: true},
	{name: "nginx.conf proxies over kept-alive HTTP/1.1", check: checkNginxProxy, nginx: true},
	{name: "nginx.conf sends each room to one gateway", check: checkNginxAffinity, nginx: true},
	{name: "kustomization lists existing files", check: checkKustomization},
}

func TestDeployManifestsMatchTheBinary(t *testing.T) {
	tree := mustLoadDeployTree(t)
	if len(tree.deployments) == 0 {
		t.Fatal("no Deployment under deploy/")
	}
	for _, d := range tree.deployments {
		for _, c := range deployChecks {
			t.Run(d.Name+"/"+c.name, func(t *testing.T) {
				if c.nginx {
					needNginx(t)
				}
				if err := c.check(tree, d); err != nil {
					t.Errorf("%v\n[checked against Deployment %s, %s]", err, d.Name, d.source.source)
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
		"the binary starts with the args and env": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "heartbeat", "soon")
		},
		"every ROOMCAST_ variable is a flag's twin": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Env = append(c.Env, corev1.EnvVar{Name: "ROOMCAST_HEARTBEET", Value: "15s"})
		},
		"args are --name=value, each flag once, none also in env": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Env = append(c.Env, corev1.EnvVar{Name: "ROOMCAST_DRAIN_DELAY", Value: "1s"})
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
			p.HTTPGet.Port = intstr.FromString("admin")
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
		"services expose the public port only": func(t *testing.T, tree *deployTree, d *deployment) {
			i := slices.IndexFunc(tree.services, func(s *service) bool {
				return len(s.Spec.Selector) > 0 && subset(s.Spec.Selector, d.Spec.Template.Labels)
			})
			if i < 0 {
				t.Fatal("no Service of the gateway to break")
			}
			s := tree.services[i]
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "admin", Port: 9090, TargetPort: intstr.FromString("admin")})
		},
		"selectors match the pod labels": func(t *testing.T, tree *deployTree, _ *deployment) {
			if len(tree.pdbs) == 0 || tree.pdbs[0].Spec.Selector == nil {
				t.Fatal("no PodDisruptionBudget to break")
			}
			tree.pdbs[0].Spec.Selector.MatchLabels = map[string]string{"app": "someone-else"}
		},
		"non-root, read-only, no privileges": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			if c.SecurityContext == nil {
				c.SecurityContext = &corev1.SecurityContext{}
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
		"admin token is a file from a Secret": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--admin-token-file=") })
		},
		"NetworkPolicy admits the listeners' ports and reaches DNS and Redis": func(_ *testing.T, _ *deployTree, d *deployment) {
			setArg(d.gateway(), "admin-addr", "0.0.0.0:9091")
		},
		"several replicas share a Redis log": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "ROOMCAST_REDIS" })
			d.Spec.Replicas = ptr(int32(3))
		},
		"service links are off": func(_ *testing.T, _ *deployTree, d *deployment) {
			d.Spec.Template.Spec.EnableServiceLinks = nil
		},
		"Prometheus scrapes the admin port": func(_ *testing.T, _ *deployTree, d *deployment) {
			a := d.Spec.Template.Annotations
			if a == nil {
				a = map[string]string{}
				d.Spec.Template.Annotations = a
			}
			a["prometheus.io/scrape"], a["prometheus.io/port"] = "true", "8080"
		},
		"ingresses route to the public port with SSE settings": func(t *testing.T, tree *deployTree, _ *deployment) {
			if len(tree.ingresses) == 0 {
				t.Fatal("no Ingress to break")
			}
			tree.ingresses[0].Annotations[nginxIngress+"proxy-read-timeout"] = "10"
		},
		"pods answer the ingresses' hosts (--public-host) and their pod IP": func(_ *testing.T, _ *deployTree, d *deployment) {
			c := d.gateway()
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--public-host=") })
		},
		"the ingress controller's room key is nginx.conf's": func(t *testing.T, tree *deployTree, _ *deployment) {
			if tree.nginxConf == "" {
				t.Fatal("no nginx.conf to break")
			}
			tree.nginxConf = writeNginxCopy(t, tree.nginxConf, "$arg_room;", "$arg_rooms;")
		},
		"ingress body limits are the flags' as nginx reads them": func(t *testing.T, tree *deployTree, _ *deployment) {
			if len(tree.ingresses) == 0 {
				t.Fatal("no Ingress to break")
			}
			tree.ingresses[0].Annotations[nginxIngress+"proxy-body-size"] = "1m"
		},
		"nginx accepts nginx.conf": func(t *testing.T, tree *deployTree, _ *deployment) {
			if tree.nginxConf == "" {
				t.Fatal("no nginx.conf to break")
			}
			tree.nginxConf = writeBrokenNginx(t, tree.nginxConf)
		},
		"nginx.conf body limits are the flags' as nginx reads them": func(t *testing.T, tree *deployTree, _ *deployment) {
			if tree.nginxConf == "" {
				t.Fatal("no nginx.conf to break")
			}
			tree.nginxConf = writeNginxCopy(t, tree.nginxConf, "client_max_body_size", "client_max_body_size 2m; #")
		},
		"nginx.conf proxies over kept-alive HTTP/1.1": func(t *testing.T, tree *deployTree, _ *deployment) {
			if tree.nginxConf == "" {
				t.Fatal("no nginx.conf to break")
			}
			tree.nginxConf = writeNginxCopy(t, tree.nginxConf, `proxy_set_header Connection "";`, "")
		},
		"nginx.conf sends each room to one gateway": func(t *testing.T, tree *deployTree, _ *deployment) {
			if tree.nginxConf == "" {
				t.Fatal("no nginx.conf to break")
			}
			tree.nginxConf = writeNginxCopy(t, tree.nginxConf, "hash $room_key consistent;", "least_conn;")
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
			if c.nginx {
				needNginx(t)
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

func mustLoadDeployTree(t *testing.T) *deployTree {
	t.Helper()
	tree, err := loadDeployTree()
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// ingressPaths is every path of an Ingress's rules.
func ingressPaths(ing *ingress) []networkingv1.HTTPIngressPath {
	var paths []networkingv1.HTTPIngressPath
	for _, r := range ing.Spec.Rules {
		if r.HTTP != nil {
			paths = append(paths, r.HTTP.Paths...)
		}
	}
	return paths
}

// TestDeployGOMEMLIMITAsTheRuntimeReadsIt: the Go runtime, not the gateway's size
// syntax, reads GOMEMLIMIT. 920M is a size the gateway's flags accept and a
// GOMEMLIMIT the runtime refuses at start (every pod would crash-loop); a test that
// read it with the flags' parser passed it.
func TestDeployGOMEMLIMITAsTheRuntimeReadsIt(t *testing.T) {
	tree := mustLoadDeployTree(t)
	if len(tree.deployments) == 0 {
		t.Fatal("no Deployment under deploy/")
	}
	d := tree.deployments[0]
	setEnv(d.gateway(), "GOMEMLIMIT", "920M")
	err := checkStarts(tree, d)
	if err == nil {
		t.Fatal("GOMEMLIMIT=920M passes, yet the Go runtime refuses it")
	}
	if !strings.Contains(err.Error(), "GOMEMLIMIT") {
		t.Fatalf("fails, but not for GOMEMLIMIT: %v", err)
	}
}
