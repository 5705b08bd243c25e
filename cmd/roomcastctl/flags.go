package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of the global flags.
const (
	defaultURL      = "http://127.0.0.1:8080"
	defaultAdminURL = "http://127.0.0.1:9090"
	defaultTimeout  = 10 * time.Second
)

// globals are the flags every command takes, before or after its name.
type globals struct {
	url, adminURL              string
	token, tokenFile           string
	adminToken, adminTokenFile string
	json                       bool
	timeout                    time.Duration
}

// register adds the global flags to fs. Their defaults are zero here, so that the
// values given before and after the command can be merged; newCLI applies the real
// defaults.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", "", "public listener `URL` (env ROOMCASTCTL_URL; default "+defaultURL+")")
	fs.StringVar(&g.adminURL, "admin-url", "", "admin listener `URL` (env ROOMCASTCTL_ADMIN_URL; default "+defaultAdminURL+")")
	fs.StringVar(&g.token, "token", "", "publish or bearer credential (shows in the process list: prefer ROOMCASTCTL_TOKEN or --token-file)")
	fs.StringVar(&g.tokenFile, "token-file", "", "`file` holding the publish or bearer credential on one line")
	fs.StringVar(&g.adminToken, "admin-token", "", "admin token for /admin/ (prefer ROOMCASTCTL_ADMIN_TOKEN or --admin-token-file)")
	fs.StringVar(&g.adminTokenFile, "admin-token-file", "", "`file` holding the admin token on one line")
	fs.BoolVar(&g.json, "json", false, "print JSON, one value per line, for scripts")
	fs.DurationVar(&g.timeout, "timeout", 0, "bound on each request; for tail, on each connection's answer, not the stream (default 10s)")
}

// merge returns g with the flags set in later (given after the command) taking
// precedence.
func (g globals) merge(later globals) globals {
	pick := func(a, b string) string {
		if b != "" {
			return b
		}
		return a
	}
	g.url = pick(g.url, later.url)
	g.adminURL = pick(g.adminURL, later.adminURL)
	if later.token != "" || later.tokenFile != "" {
		g.token, g.tokenFile = later.token, later.tokenFile
	}
	if later.adminToken != "" || later.adminTokenFile != "" {
		g.adminToken, g.adminTokenFile = later.adminToken, later.adminTokenFile
	}
	g.json = g.json || later.json
	if later.timeout != 0 {
		g.timeout = later.timeout
	}
	return g
}

// cli is a command's resolved configuration and HTTP client.
type cli struct {
	io         stdio
	url        string // public base URL, no trailing slash
	adminURL   string // admin base URL, no trailing slash
	token      string
	adminToken string
	json       bool
	timeout    time.Duration
	transport  *http.Transport
	hc         *http.Client // requests other than streams; bounded by timeout
}

func newCLI(g globals, io stdio) (*cli, error) {
	c := &cli{io: io, json: g.json, timeout: g.timeout}
	if c.timeout == 0 {
		c.timeout = defaultTimeout
	}
	if c.timeout < 0 {
		return nil, usagef("--timeout must be positive")
	}
	var err error
	if c.url, err = baseURL("url", g.url, "ROOMCASTCTL_URL", defaultURL, io.getenv); err != nil {
		return nil, err
	}
	if c.adminURL, err = baseURL("admin-url", g.adminURL, "ROOMCASTCTL_ADMIN_URL", defaultAdminURL, io.getenv); err != nil {
		return nil, err
	}
	if c.token, err = resolveSecret("token", g.token, g.tokenFile, "ROOMCASTCTL_TOKEN", io.getenv); err != nil {
		return nil, err
	}
	if c.adminToken, err = resolveSecret("admin-token", g.adminToken, g.adminTokenFile, "ROOMCASTCTL_ADMIN_TOKEN", io.getenv); err != nil {
		return nil, err
	}
	c.transport = http.DefaultTransport.(*http.Transport).Clone()
	c.transport.MaxIdleConnsPerHost = 4
	c.transport.ResponseHeaderTimeout = c.timeout // streams too: the gateway answers at once
	c.hc = &http.Client{Transport: c.transport, Timeout: c.timeout}
	return c, nil
}

// close releases the idle connections the command kept.
func (c *cli) close() { c.transport.CloseIdleConnections() }

// baseURL resolves a listener's URL from its flag, its environment variable or the
// default, and checks it is an absolute http(s) URL without query or credentials.
func baseURL(flagName, value, envName, def string, getenv func(string) string) (string, error) {
	src := "--" + flagName
	if value == "" {
		value, src = getenv(envName), envName
	}
	if value == "" {
		return def, nil
	}
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", usagef("%s: want an http:// or https:// base URL such as %s", src, def)
	}
	if u.User != nil {
		return "", usagef("%s: put credentials in --token or --admin-token, not in the URL", src)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// fprintf writes to the command's standard output.
func (c *cli) printf(format string, a ...any) { fmt.Fprintf(c.io.out, format, a...) }
