package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// secretsDir holds the stand-ins of files that Secret volumes provide in the pod;
// TestMain sets it.
var secretsDir string

// standInSecretFiles returns args with every --*-file=PATH that a Secret volume
// provides in the pod pointed at a stand-in file with a stand-in secret, so the
// binary can read it here. A path no Secret volume provides is left as it is, and
// the binary refuses it as it would in the pod.
func (d *deployment) standInSecretFiles(args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok || !strings.HasSuffix(name, "-file") {
			out = append(out, a)
			continue
		}
		vol, _, key, ok := d.secretFile(value)
		if !ok {
			out = append(out, a)
			continue
		}
		if secretsDir == "" {
			return nil, fmt.Errorf("--%s: no directory for stand-in secret files", name)
		}
		standIn := filepath.Join(secretsDir, vol.Name, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(standIn), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(standIn, []byte("secret-"+vol.Secret.SecretName+"-"+key+"\n"), 0o600); err != nil {
			return nil, err
		}
		out = append(out, "--"+name+"="+standIn)
	}
	return out, nil
}
