package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"time"
)

// upstreamServerRE is a server line of an upstream block at the start of a line (not
// a commented one, and not a server block, which has no address).
var upstreamServerRE = regexp.MustCompile(`(?m)^(\s*)server\s+[^\s;{]+\s*;`)

// nginxConfWithUpstream returns nginx.conf, nil when there is none; it fails when
// the file has no upstream server line for a check to point at stand-ins.
func nginxConfWithUpstream(tree *deployTree) ([]byte, error) {
	if tree.nginxConf == "" {
		return nil, nil
	}
	data, err := readBounded(tree.nginxConf)
	if err != nil {
		return nil, err
	}
	if !upstreamServerRE.Match(data) {
		return nil, fmt.Errorf("%s: no upstream server line", tree.nginxConf)
	}
	return data, nil
}

// renderNginx is the nginx.conf data with its listen directives moved to listen and
// its upstream server lines replaced by one line per server address, as every check
// that runs the file itself renders it.
func renderNginx(data []byte, listen string, servers ...string) string {
	conf := listenRE.ReplaceAllString(string(data), "${1}listen "+listen+";")
	lines := make([]string, len(servers))
	for i, s := range servers {
		lines[i] = "server " + s + ";"
	}
	return upstreamServerRE.ReplaceAllString(conf, "${1}"+strings.Join(lines, " "))
}

// proxySeen is what the stand-in upstream saw of one request.
type proxySeen struct {
	path, proto, connection, remote string
}

// checkNginxProxy runs nginx.conf itself, listening on loopback and proxying to a
// stand-in upstream (its upstream server lines pointed there), and checks what the
// gateway would see: every location proxies HTTP/1.1 without Connection: close, and
// upstream connections are kept alive and reused. Not checked, because a client
// cannot tell: proxy_buffering (nginx passes a flushed event on at once either way,
// and the gateway sends X-Accel-Buffering: no), and the read and send timeouts (seen
// only by waiting for them).
func checkNginxProxy(tree *deployTree, _ *deployment) error {
	data, err := nginxConfWithUpstream(tree)
	if data == nil || err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		seen []proxySeen
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, proxySeen{r.URL.Path, r.Proto, r.Header.Get("Connection"), r.RemoteAddr})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer up.Close()
	upAddr := strings.TrimPrefix(up.URL, "http://")
	addr, logs, stop, err := runNginx(func(listen string) string { return renderNginx(data, listen, upAddr) })
	if err != nil {
		return err
	}
	defer stop()
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := &http.Client{}
	do := func(method, path string) error {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(""))
		if err != nil {
			return err
		}
		res, err := hc.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			return fmt.Errorf("%s %s through nginx: status %d", method, path, res.StatusCode)
		}
		return nil
	}
	// Two requests one after the other (the second reuses the upstream connection),
	// then one to each other location.
	for _, r := range [][2]string{{"GET", "/healthz"}, {"GET", "/healthz"}, {"POST", "/events"}, {"POST", "/rooms/deploy-drift/events"}} {
		if err := do(r[0], r[1]); err != nil {
			return fmt.Errorf("%w\n%s", err, logs())
		}
	}
	var errs []error
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		return fmt.Errorf("the upstream saw %d requests\n%s", len(seen), logs())
	}
	for _, s := range seen {
		if s.proto != "HTTP/1.1" {
			errs = append(errs, fmt.Errorf("%s reached the upstream over %s, want HTTP/1.1 (proxy_http_version 1.1)", s.path, s.proto))
		}
		if strings.EqualFold(s.connection, "close") {
			errs = append(errs, fmt.Errorf("%s reached the upstream with Connection: close (proxy_set_header Connection \"\")", s.path))
		}
	}
	if seen[0].remote != seen[1].remote {
		errs = append(errs, fmt.Errorf("two requests in a row took two upstream connections (%s, %s): no keepalive in the upstream block", seen[0].remote, seen[1].remote))
	}
	return errors.Join(errs...)
}
