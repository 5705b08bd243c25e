package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
)

// checkToken settles the publish token: from --publish-token or from
// --publish-token-file (not both), trimmed like the token a publisher presents.
func checkToken(c *config) error {
	if c.PublishTokenFile != "" {
		if c.PublishToken != "" {
			return errors.New("--publish-token-file: set either it or --publish-token, not both")
		}
		token, err := readTokenFile(c.PublishTokenFile)
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

// maxTokenFile bounds what --publish-token-file and --admin-token-file read.
const maxTokenFile = 64 << 10

// readTokenFile reads the publish token from path, trimmed of spaces and newlines
// at both ends as the presented token is. Errors never include the file's content.
func readTokenFile(path string) (string, error) {
	return readSecretFile("--publish-token-file", path)
}

// readSecretFile reads a one-line token from path, for the flag named flagName,
// trimmed of spaces and newlines at both ends as a presented token is. Errors name
// the flag and never include the file's content.
func readSecretFile(flagName, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", flagName, path, pathErr(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", flagName, path, pathErr(err))
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("%s %q: longer than %d bytes", flagName, path, maxTokenFile)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s %q: empty", flagName, path)
	}
	if strings.ContainsAny(token, "\r\n") {
		return "", fmt.Errorf("%s %q: more than one line", flagName, path)
	}
	return token, nil
}

// pathErr is err without the path it repeats.
func pathErr(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// redisTarget is --redis taken apart: seed addresses without credentials, and the
// credentials, which are never printed.
type redisTarget struct {
	addrs              []string
	username, password string
}

// String is the seed list with any password replaced by "xxxxx": safe to log.
func (t redisTarget) String() string {
	if t.username == "" && t.password == "" {
		return strings.Join(t.addrs, ",")
	}
	user := url.UserPassword(t.username, "xxxxx").String()
	out := make([]string, len(t.addrs))
	for i, a := range t.addrs {
		out[i] = "redis://" + user + "@" + a
	}
	return strings.Join(out, ",")
}

// parseRedis reads --redis: comma-separated seeds, each host:port, user:pass@host:port
// or redis://[user[:pass]@]host:port. Every seed with credentials must carry the
// same ones. Errors show the seed with its password hidden.
func parseRedis(s string) (redisTarget, error) {
	var t redisTarget
	seenCreds := false
	for i, seed := range strings.Split(s, ",") {
		seed = strings.TrimSpace(seed)
		if seed == "" {
			continue
		}
		raw := seed
		if !strings.Contains(raw, "://") {
			raw = "redis://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			return t, fmt.Errorf("--redis: seed %d (%s): want host:port or redis://[user:password@]host:port", i+1, hideSecret(seed))
		}
		switch {
		case u.Scheme != "redis":
			return t, fmt.Errorf("--redis: seed %d (%s): scheme %q: only redis:// is supported", i+1, hideSecret(seed), u.Scheme)
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
		t.addrs = append(t.addrs, u.Host)
	}
	if s != "" && len(t.addrs) == 0 {
		return t, errors.New("--redis: no address")
	}
	return t, nil
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
