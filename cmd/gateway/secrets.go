package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
)

// checkToken settles the publish token: from --publish-token or from
// --publish-token-file (not both), trimmed like the token a publisher presents.
func checkToken(c *config) error {
	if c.PublishTokenFile != "" {
		if c.PublishToken != "" {
			return errors.New("--publish-token-file: set either it or --publish-token, not both")
		}
		token, err := readKeysFile("--publish-token-file", c.PublishTokenFile)
		if err != nil {
			return err
		}
		c.PublishToken = token
		return nil
	}
	if c.PublishToken != "" {
		if c.PublishToken = strings.TrimSpace(c.PublishToken); c.PublishToken == "" {
			return errors.New("--publish-token: blank (leave it unset to allow loopback publishers only)")
		}
	}
	return nil
}

// maxTokenFile bounds what a secret file (--publish-token-file,
// --redis-password-file) holds.
const maxTokenFile = 64 << 10

// readSecretFile reads the secret in path for flag ("--name"), trimmed of spaces and
// newlines at both ends as a presented token is. Errors never include the file's
// content.
func readSecretFile(flag, path string) (string, error) {
	b, err := readBoundedFile(flag, path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s %q: empty", flag, path)
	}
	if strings.ContainsAny(token, "\r\n") {
		return "", fmt.Errorf("%s %q: more than one line", flag, path)
	}
	return token, nil
}

// readBoundedFile reads a secret file for flag ("--name"): at most maxTokenFile bytes.
func readBoundedFile(flag, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, path, pathErr(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, path, pathErr(err))
	}
	if len(b) > maxTokenFile {
		return nil, fmt.Errorf("%s %q: longer than %d bytes", flag, path, maxTokenFile)
	}
	return b, nil
}

// pathErr is err without the path it repeats.
func pathErr(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// redisTarget is --redis taken apart: seed addresses without credentials, the
// credentials, which are never printed, and whether to speak TLS (rediss://).
type redisTarget struct {
	addrs              []string
	username, password string
	tls                bool
}

// String is the seed list with any password replaced by "xxxxx": safe to log.
func (t redisTarget) String() string {
	if t.username == "" && t.password == "" && !t.tls {
		return strings.Join(t.addrs, ",")
	}
	prefix := "redis://"
	if t.tls {
		prefix = "rediss://"
	}
	if t.username != "" || t.password != "" {
		prefix += url.UserPassword(t.username, "xxxxx").String() + "@"
	}
	out := make([]string, len(t.addrs))
	for i, a := range t.addrs {
		out[i] = prefix + a
	}
	return strings.Join(out, ",")
}

// parseRedis reads --redis: comma-separated seeds, each host:port, user:pass@host:port
// or redis[s]://[user[:pass]@]host:port. Every seed with credentials must carry the
// same ones, and every seed with a scheme the same scheme; seeds without take the
// others' (rediss:// is TLS for every seed). Errors show the seed with its password
// hidden.
func parseRedis(s string) (redisTarget, error) {
	var t redisTarget
	seenCreds := false
	scheme := ""
	for i, seed := range strings.Split(s, ",") {
		seed = strings.TrimSpace(seed)
		if seed == "" {
			continue
		}
		raw := seed
		explicit := strings.Contains(raw, "://")
		if !explicit {
			raw = "redis://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			return t, fmt.Errorf("--redis: seed %d (%s): want host:port or redis://[user:password@]host:port", i+1, hideSecret(seed))
		}
		switch {
		case u.Scheme != "redis" && u.Scheme != "rediss":
			return t, fmt.Errorf("--redis: seed %d (%s): scheme %q: want redis:// or rediss://", i+1, hideSecret(seed), u.Scheme)
		case explicit && scheme != "" && u.Scheme != scheme:
			return t, fmt.Errorf("--redis: seed %d (%s): every seed must use the same scheme (%s:// before)", i+1, hideSecret(seed), scheme)
		case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
			return t, fmt.Errorf("--redis: seed %d (%s): want host:port or redis://[user:password@]host:port, without a path or query", i+1, hideSecret(seed))
		}
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" {
			return t, fmt.Errorf("--redis: seed %d (%s): want host:port", i+1, hideSecret(seed))
		}
		if u.User != nil {
			pass, _ := u.User.Password()
			if seenCreds && (u.User.Username() != t.username || pass != t.password) {
				return t, fmt.Errorf("--redis: seed %d (%s): every seed must carry the same credentials", i+1, hideSecret(seed))
			}
			t.username, t.password, seenCreds = u.User.Username(), pass, true
		}
		if explicit {
			scheme = u.Scheme
		}
		t.addrs = append(t.addrs, u.Host)
	}
	t.tls = scheme == "rediss"
	if s != "" && len(t.addrs) == 0 {
		return t, errors.New("--redis: no address")
	}
	return t, nil
}

// maxCAFile bounds what --redis-tls-ca reads.
const maxCAFile = 1 << 20

// redisConnection settles how the log reaches Redis: --redis taken apart, the
// password from --redis-password-file (not together with one in --redis; the user
// is the one in --redis, else "default"), and for rediss:// a TLS configuration
// (TLS 1.2 or later; the CAs of --redis-tls-ca, else the system's; the server name
// is the seed's host). The tls configuration is nil for redis://.
func redisConnection(c config) (redisTarget, *tls.Config, error) {
	t, err := parseRedis(c.Redis)
	if err != nil {
		return t, nil, err
	}
	if c.Redis == "" {
		switch {
		case c.RedisPasswordFile != "":
			return t, nil, errors.New("--redis-password-file: only with --redis")
		case c.RedisTLSCA != "":
			return t, nil, errors.New("--redis-tls-ca: only with --redis")
		}
		return t, nil, nil
	}
	if c.RedisPasswordFile != "" {
		if t.password != "" {
			return t, nil, errors.New("--redis-password-file: set either it or a password in --redis, not both")
		}
		if t.password, err = readSecretFile("--redis-password-file", c.RedisPasswordFile); err != nil {
			return t, nil, err
		}
	}
	if !t.tls {
		if c.RedisTLSCA != "" {
			return t, nil, errors.New("--redis-tls-ca: only with rediss:// seeds")
		}
		return t, nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.RedisTLSCA != "" {
		if cfg.RootCAs, err = readCAFile(c.RedisTLSCA); err != nil {
			return t, nil, err
		}
	}
	return t, cfg, nil
}

// readCAFile reads a PEM bundle of CA certificates.
func readCAFile(path string) (*x509.CertPool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--redis-tls-ca %q: %w", path, pathErr(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("--redis-tls-ca %q: %w", path, pathErr(err))
	}
	if len(b) > maxCAFile {
		return nil, fmt.Errorf("--redis-tls-ca %q: longer than %d bytes", path, maxCAFile)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--redis-tls-ca %q: no PEM certificate", path)
	}
	return pool, nil
}

// hideSecret drops whatever precedes the last "@" of a seed: the credentials.
func hideSecret(seed string) string {
	i := strings.LastIndex(seed, "@")
	if i < 0 {
		return seed
	}
	scheme := ""
	if j := strings.Index(seed, "://"); j >= 0 && j < i {
		scheme = seed[:j+3]
	}
	return scheme + "xxxxx@" + seed[i+1:]
}

// hidden replaces a secret's value on /debug/pprof/cmdline.
const hidden = "xxxxx"

// secretFlags are the flags whose values hold secrets, with what the command line
// /debug/pprof/cmdline serves shows of a value: every flag that has a *-file form
// (TestSecretFlagsAreRedacted), and --redis, whose seeds may carry a password.
var secretFlags = map[string]func(string) string{
	"publish-token": func(string) string { return hidden },
	// Credentials in --redis need an "@"; a value with one is hidden whole, since a
	// password may hold commas and colons that would split it into seeds.
	"redis": func(v string) string {
		if strings.Contains(v, "@") {
			return hidden
		}
		return v
	},
}

// redactArgs is the command line args (the program's name first) with the value of
// every secret flag (secretFlags) replaced, in each form the flag package reads:
// -name=value, --name=value, and -name value. Every argument is looked at, also past
// one the flag package would stop at: a value hidden for nothing costs nothing.
func redactArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		a := out[i]
		dashes := "-"
		if strings.HasPrefix(a, "--") {
			dashes = "--"
		} else if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, withValue := strings.Cut(a[len(dashes):], "=")
		hide, ok := secretFlags[name]
		switch {
		case !ok:
		case withValue:
			out[i] = dashes + name + "=" + hide(value)
		case i+1 < len(out):
			i++
			out[i] = hide(out[i])
		}
	}
	return out
}
