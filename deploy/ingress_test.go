package deploy_test

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

const nginxIngress = "nginx.ingress.kubernetes.io/"

// checkIngresses checks what the ingress-nginx annotations promise in the
// controller's own terms (timeouts are whole seconds) and where the Ingresses route.
func checkIngresses(tree *deployTree, d *deployment) error {
	r, err := d.run(tree)
	if err != nil {
		return err
	}
	heartbeat, err := r.duration("heartbeat")
	if err != nil {
		return err
	}
	public, err := d.port(tree, "addr")
	if err != nil {
		return err
	}
	var errs []error
	for _, ing := range tree.ingresses {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: Ingress %s: %s", ing.source.source, ing.Name, fmt.Sprintf(format, args...)))
		}
		a := ing.Annotations
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
			} else if time.Duration(secs)*time.Second <= heartbeat {
				fail("%s %ss is not above --heartbeat %s: idle streams would be cut", k, v, heartbeat)
			}
		}
		if v := a[nginxIngress+"proxy-http-version"]; v != "" && v != "1.1" {
			fail("proxy-http-version %q, want 1.1", v)
		}
		for _, p := range ingressPaths(ing) {
			if err := ingressBackend(tree, d, p.Backend, public); err != nil {
				fail("path %s: %v", p.Path, err)
			}
		}
		if ing.Spec.DefaultBackend != nil {
			if err := ingressBackend(tree, d, *ing.Spec.DefaultBackend, public); err != nil {
				fail("default backend: %v", err)
			}
		}
		if a[nginxIngress+"proxy-body-size"] == "" {
			fail("no proxy-body-size")
		}
		if v := a[nginxIngress+"upstream-hash-by"]; v != roomKey {
			fail("upstream-hash-by %q, want %q: the Ingresses share one upstream, so they hash the room alike, as nginx.conf does", v, roomKey)
		}
	}
	return errors.Join(errs...)
}

// roomKey is the variable nginx.conf and the ingress-nginx controller's http-snippet
// compute for room affinity, and ingress.yaml's comment repeats the snippet.
const roomKey = "$room_key"

// checkRoomKeyMaps checks that the maps ingress.yaml tells the controller's
// ConfigMap to define are nginx.conf's, line for line.
func checkRoomKeyMaps(tree *deployTree, _ *deployment) error {
	if tree.nginxConf == "" || len(tree.ingresses) == 0 {
		return nil
	}
	conf, err := readBounded(tree.nginxConf)
	if err != nil {
		return err
	}
	ingressFile := filepath.Join(deployDir, "ingress.yaml")
	ing, err := readBounded(ingressFile)
	if err != nil {
		return err
	}
	want := mapBlocks(strings.Split(string(conf), "\n"), "")
	if len(want) == 0 {
		return fmt.Errorf("%s: no map blocks", tree.nginxConf)
	}
	got := mapBlocks(strings.Split(string(ing), "\n"), "#")
	if !slices.Equal(got, want) {
		return fmt.Errorf("the http-snippet in %s's comment is not nginx.conf's maps:\n%s\nwant:\n%s",
			ingressFile, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return nil
}

// mapBlocks returns the lines of the map blocks in lines (each with prefix, such as
// a comment sign, cut), trimmed.
func mapBlocks(lines []string, prefix string) []string {
	var out []string
	in := false
	for _, l := range lines {
		l, ok := strings.CutPrefix(strings.TrimSpace(l), prefix)
		if !ok {
			in = false
			continue
		}
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "map ") && strings.HasSuffix(l, "{") {
			in = true
		}
		if in {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		if l == "}" {
			in = false
		}
	}
	return out
}

// batchOnly reports whether an Ingress routes POST /events alone: its body limit is
// then --max-batch-body, else --max-body.
func batchOnly(ing *ingress) bool {
	paths := ingressPaths(ing)
	if len(paths) == 0 || ing.Spec.DefaultBackend != nil {
		return false
	}
	for _, p := range paths {
		if p.Path != "/events" || p.PathType == nil || *p.PathType != networkingv1.PathTypeExact {
			return false
		}
	}
	return true
}

// checkIngressBodySize has nginx itself read each proxy-body-size (ingress-nginx
// writes it into client_max_body_size as it is) and requires the limit to be the
// gateway's, in bytes as the started binary reports it.
func checkIngressBodySize(tree *deployTree, d *deployment) error {
	maxBody, maxBatch, err := bodyLimits(tree, d)
	if err != nil {
		return err
	}
	var values []string
	var probes []bodyProbe
	var errs []error
	for _, ing := range tree.ingresses {
		v := ing.Annotations[nginxIngress+"proxy-body-size"]
		if v == "" {
			errs = append(errs, fmt.Errorf("%s: Ingress %s: no proxy-body-size", ing.source.source, ing.Name))
			continue
		}
		p := bodyProbe{path: fmt.Sprintf("/ingress/%d", len(values)), what: "--max-body", want: maxBody}
		if batchOnly(ing) {
			p.what, p.want = "--max-batch-body", maxBatch
		}
		p.what = fmt.Sprintf("Ingress %s proxy-body-size %s: %s", ing.Name, v, p.what)
		values, probes = append(values, v), append(probes, p)
	}
	if len(probes) > 0 {
		server := func(listen string) string {
			var b strings.Builder
			fmt.Fprintf(&b, "server {\nlisten %s;\n", listen)
			for i, v := range values {
				fmt.Fprintf(&b, "location = %s {\nclient_max_body_size %s;\nreturn 204;\n}\n", probes[i].path, v)
			}
			b.WriteString("}\n")
			return b.String()
		}
		if err := nginxBodyLimits(server, probes); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func ingressBackend(tree *deployTree, d *deployment, b networkingv1.IngressBackend, public int32) error {
	if b.Service == nil {
		return errors.New("no service backend")
	}
	for _, s := range tree.services {
		if s.Name != b.Service.Name {
			continue
		}
		if !subset(s.Spec.Selector, d.Spec.Template.Labels) || len(s.Spec.Selector) == 0 {
			return fmt.Errorf("Service %s does not select the gateway pods", s.Name)
		}
		for _, p := range s.Spec.Ports {
			if (b.Service.Port.Name != "" && p.Name == b.Service.Port.Name) || (b.Service.Port.Number != 0 && p.Port == b.Service.Port.Number) {
				port, err := d.resolvePort(targetPort(p))
				if err != nil {
					return err
				}
				if port != public {
					return fmt.Errorf("Service %s port %s reaches container port %d, not the public port %d", s.Name, p.Name, port, public)
				}
				return nil
			}
		}
		return fmt.Errorf("Service %s has no port %+v", s.Name, b.Service.Port)
	}
	return fmt.Errorf("no Service %q under deploy/", b.Service.Name)
}

// podIPHost is the Host header of a request by pod IP: the kubelet's probes and
// Prometheus's scrapes.
const podIPHost = "10.0.0.12:8080"

// servedHosts are the Host headers the pods must answer: every host the Ingresses
// route (a wildcard host *.example.com as one name under it), and a pod IP.
func (tree *deployTree) servedHosts() []string {
	hosts := []string{podIPHost}
	add := func(h string) {
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			h = "probe." + rest
		}
		if h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	for _, ing := range tree.ingresses {
		for _, r := range ing.Spec.Rules {
			add(r.Host)
		}
		for _, t := range ing.Spec.TLS {
			for _, h := range t.Hosts {
				add(h)
			}
		}
	}
	return hosts
}

// checkServedHosts asks the binary started with the pod's args: its public listener
// must answer every host the Ingresses route to it (behind a proxy the Host is the
// public name, which --public-host must list, or every request is 421), and both
// listeners a request by pod IP.
func checkServedHosts(tree *deployTree, d *deployment) error {
	r, err := d.run(tree)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range tree.servedHosts() {
		st, ok := r.hosts[h]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("Host %q was not probed", h))
		case st[0] != http.StatusOK:
			errs = append(errs, fmt.Errorf("GET /healthz with Host %q: %d, want 200 (an Ingress routes this host: list it in --public-host)", h, st[0]))
		case h == podIPHost && st[1] != http.StatusOK:
			errs = append(errs, fmt.Errorf("GET /metrics on the admin listener with Host %q (a scrape by pod IP): %d, want 200", h, st[1]))
		}
	}
	return errors.Join(errs...)
}
