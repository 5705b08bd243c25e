package deploy_test

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// gateway is the gateway container (checks guard against its absence through
// container).
func (d *deployment) gateway() *corev1.Container {
	c, _ := d.container()
	if c == nil {
		return &corev1.Container{}
	}
	return c
}

func (d *deployment) container() (*corev1.Container, error) {
	cs := d.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == "gateway" {
			return &cs[i], nil
		}
	}
	return nil, errors.New("no container named gateway")
}

// envValue is what a variable holds in the pod; a Secret reference stands for a
// string from that Secret.
func envValue(e corev1.EnvVar) string {
	if e.ValueFrom != nil {
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			return "secret-" + r.Name + "-" + r.Key
		}
		return "from-elsewhere"
	}
	return e.Value
}

// env is the container's environment: the image's ENV, then the container's env
// (later entries win).
func (d *deployment) env(tree *deployTree) [][2]string {
	env := append([][2]string(nil), tree.image.Env...)
	for _, e := range d.gateway().Env {
		env = append(env, [2]string{e.Name, envValue(e)})
	}
	return env
}

// run is what the binary does with the pod's args and env.
func (d *deployment) run(tree *deployTree) (*podRun, error) {
	c, err := d.container()
	if err != nil {
		return nil, err
	}
	args, err := d.standInSecretFiles(c.Args)
	if err != nil {
		return nil, err
	}
	r := runPod(args, d.env(tree), tree.servedHosts())
	return r, r.err
}

// raw is the value a flag has in the pod as written: its arg, else its environment
// twin (the container's over the image's), else the binary's default. It serves
// the listener flags, which the test moves to loopback.
func (d *deployment) raw(tree *deployTree, flagName string) (string, error) {
	flags, err := binaryFlags()
	if err != nil {
		return "", err
	}
	f, ok := flags[flagName]
	if !ok {
		return "", fmt.Errorf("the binary has no flag --%s", flagName)
	}
	v, found := f.def, false
	for _, a := range d.gateway().Args {
		if rest, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), flagName+"="); ok {
			v, found = rest, true
		}
	}
	if found {
		return v, nil
	}
	for _, kv := range d.env(tree) {
		if kv[0] == envName(flagName) && kv[1] != "" {
			v = kv[1]
		}
	}
	return v, nil
}

// port is the port of a listener flag's value in the pod.
func (d *deployment) port(tree *deployTree, flagName string) (int32, error) {
	v, err := d.raw(tree, flagName)
	if err != nil {
		return 0, err
	}
	_, p, err := net.SplitHostPort(v)
	if err != nil {
		return 0, fmt.Errorf("--%s=%s: %w", flagName, v, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("--%s=%s: %w", flagName, v, err)
	}
	return int32(n), nil
}

// resolvePort turns a port number or name into a container port number.
func (d *deployment) resolvePort(p intstr.IntOrString) (int32, error) {
	c, err := d.container()
	if err != nil {
		return 0, err
	}
	if p.Type == intstr.Int {
		return p.IntVal, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
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
func setArg(c *corev1.Container, name, value string) {
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
func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

func ptr[T any](v T) *T { return &v }
