package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/roomcast/roomcast/gateway"
)

// checkAccess settles the access flags: --metrics-addr checked, --public-host and
// --allow-origin checked and normalized in place, and the admin token read from
// --admin-token-file.
func checkAccess(c *config, fromEnv map[string]bool) error {
	if c.MetricsAddr != "" {
		if err := checkListenAddr(c.MetricsAddr); err != nil {
			return fmt.Errorf("%s %q: %w", flagRef("metrics-addr", fromEnv), c.MetricsAddr, err)
		}
		if !strings.HasSuffix(c.MetricsAddr, ":0") && (c.MetricsAddr == c.Addr || c.MetricsAddr == c.AdminAddr) {
			return fmt.Errorf("%s %q: must differ from --addr and --admin-addr", flagRef("metrics-addr", fromEnv), c.MetricsAddr)
		}
	}
	if len(c.PublicHosts) > 0 {
		hosts, err := gateway.CheckHosts(c.PublicHosts)
		if err != nil {
			return fmt.Errorf("%s: %w", flagRef("public-host", fromEnv), errors.New(strings.TrimPrefix(err.Error(), "gateway: ")))
		}
		c.PublicHosts = hosts
	}
	if c.AllowOrigin != "" {
		var list []string
		for _, o := range strings.Split(c.AllowOrigin, ",") {
			o = strings.TrimSpace(o)
			if o == "" {
				return fmt.Errorf("%s %q: an empty entry (write origins separated by single commas)", flagRef("allow-origin", fromEnv), c.AllowOrigin)
			}
			list = append(list, o)
		}
		origins, err := gateway.CheckOrigins(list)
		if err != nil {
			return fmt.Errorf("%s: %w", flagRef("allow-origin", fromEnv), errors.New(strings.TrimPrefix(err.Error(), "gateway: ")))
		}
		c.AllowOrigin = strings.Join(origins, ",")
	}
	if c.AdminTokenFile != "" {
		token, err := readSecretFile(flagRef("admin-token-file", fromEnv), c.AdminTokenFile)
		if err != nil {
			return err
		}
		c.AdminToken = token
	}
	return nil
}

// allowOrigins is --allow-origin as a list; nil when it is empty.
func (c config) allowOrigins() []string {
	if c.AllowOrigin == "" {
		return nil
	}
	return strings.Split(c.AllowOrigin, ",")
}

// loopbackAddr reports whether a listener's address is a loopback one.
func loopbackAddr(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
