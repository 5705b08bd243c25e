package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// deployDir is this folder; the Dockerfile is at the module root.
	deployDir  = "."
	dockerfile = "../Dockerfile"
	// maxManifest bounds what is read of one file.
	maxManifest = 1 << 20
	// notManifests holds YAML that is not Kubernetes objects.
	notManifests = "prometheus"
)

// deployTree is every object under deploy/, decoded into the Kubernetes API's types,
// and what the Dockerfile's final stage sets.
type deployTree struct {
	deployments     []*deployment // the gateway's
	exporters       []*deployment // redis_exporter's (component redis-exporter)
	services        []*service
	pdbs            []*podDisruptionBudget
	ingresses       []*ingress
	networkPolicies []*networkPolicy
	kustomizations  []*kustomization
	image           imageConfig
	nginxConf       string // path of nginx.conf, "" when absent
}

// source says where an object came from, for messages.
type source struct{ source string }

type deployment struct {
	appsv1.Deployment
	source
}

type service struct {
	corev1.Service
	source
}

type podDisruptionBudget struct {
	policyv1.PodDisruptionBudget
	source
}

type ingress struct {
	networkingv1.Ingress
	source
}

// kustomization is the part of a kustomize Kustomization the checks read (its Go
// types live in sigs.k8s.io/kustomize, which this module does not depend on).
type kustomization struct {
	metav1.TypeMeta `json:",inline"`
	Resources       []string `json:"resources"`
	source
	path string
}

func loadDeployTree() (*deployTree, error) {
	tree := &deployTree{}
	err := filepath.WalkDir(deployDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path == notManifests {
				return filepath.SkipDir // Prometheus rule files: promtool checks them (alerts_test.go)
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml":
		default:
			return nil
		}
		data, err := readBounded(path)
		if err != nil {
			return err
		}
		r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for n := 1; ; n++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("deploy/%s: %w", path, err)
			}
			if err := tree.add(path, n, doc); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if tree.image, err = loadImageConfig(dockerfile); err != nil {
		return nil, err
	}
	switch _, err := os.Stat(filepath.Join(deployDir, "nginx.conf")); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		tree.nginxConf = filepath.Join(deployDir, "nginx.conf")
	}
	return tree, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifest {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxManifest)
	}
	return data, nil
}

// add decodes one YAML document strictly (an unknown field is an error, so a typo in
// a manifest fails here instead of being silently ignored by the API server's older
// clients).
func (tree *deployTree) add(path string, n int, doc []byte) error {
	src := source{fmt.Sprintf("deploy/%s (document %d)", filepath.ToSlash(path), n)}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("%s: %w", src.source, err)
	}
	if tm.Kind == "" && tm.APIVersion == "" {
		if j, err := yaml.YAMLToJSON(doc); err == nil && string(bytes.TrimSpace(j)) == "null" {
			return nil // comments only
		}
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return fmt.Errorf("%s: no kind or apiVersion", src.source)
	}
	var target any
	switch tm.Kind {
	case "Deployment":
		d := &deployment{source: src}
		tree.deployments, target = append(tree.deployments, d), &d.Deployment
	case "Service":
		s := &service{source: src}
		tree.services, target = append(tree.services, s), &s.Service
	case "PodDisruptionBudget":
		p := &podDisruptionBudget{source: src}
		tree.pdbs, target = append(tree.pdbs, p), &p.PodDisruptionBudget
	case "Ingress":
		i := &ingress{source: src}
		tree.ingresses, target = append(tree.ingresses, i), &i.Ingress
	case "NetworkPolicy":
		np := &networkPolicy{source: src}
		tree.networkPolicies, target = append(tree.networkPolicies, np), &np.NetworkPolicy
	case "Kustomization":
		k := &kustomization{source: src, path: path}
		tree.kustomizations = append(tree.kustomizations, k)
		if err := yaml.Unmarshal(doc, k); err != nil {
			return fmt.Errorf("%s: %w", src.source, err)
		}
		return nil
	default:
		return fmt.Errorf("%s: no drift checks for kind %s: teach deploy/drift_test.go what to check", src.source, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, target); err != nil {
		return fmt.Errorf("%s: %w", src.source, err)
	}
	if n := len(tree.deployments); tm.Kind == "Deployment" && tree.deployments[n-1].Labels[componentLabel] == exporterComponent {
		tree.exporters = append(tree.exporters, tree.deployments[n-1])
		tree.deployments = tree.deployments[:n-1]
	}
	return nil
}

// componentLabel tells the gateway's Deployments from redis_exporter's, which the
// gateway checks do not apply to (redis_test.go checks it).
const (
	componentLabel    = "app.kubernetes.io/component"
	exporterComponent = "redis-exporter"
)

// imageConfig is what the final stage of the Dockerfile sets.
type imageConfig struct {
	Entrypoint []string // exec form only; nil for the shell form
	Env        [][2]string
	User       string
}

// loadImageConfig reads the Dockerfile with BuildKit's own parser.
func loadImageConfig(path string) (imageConfig, error) {
	data, err := readBounded(path)
	if err != nil {
		return imageConfig{}, err
	}
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return imageConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	var img imageConfig
	for _, n := range res.AST.Children {
		var args []string
		for x := n.Next; x != nil; x = x.Next {
			args = append(args, x.Value)
		}
		switch strings.ToLower(n.Value) {
		case "from":
			img = imageConfig{} // only the final stage counts
		case "env":
			if len(args)%2 != 0 {
				return imageConfig{}, fmt.Errorf("%s:%d: ENV without pairs", path, n.StartLine)
			}
			for i := 0; i < len(args); i += 2 {
				img.Env = append(img.Env, [2]string{args[i], args[i+1]})
			}
		case "user":
			if len(args) > 0 {
				img.User = args[0]
			}
		case "entrypoint":
			img.Entrypoint = nil
			if n.Attributes["json"] {
				img.Entrypoint = args
			}
		}
	}
	return img, nil
}
