package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nginxPath is the nginx binary: $ROOMCAST_NGINX, else nginx on PATH or in
// /usr/sbin (Debian's package puts it there, outside a user's PATH).
func nginxPath() (string, error) {
	if p := os.Getenv("ROOMCAST_NGINX"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", errors.New("nginx not found (set ROOMCAST_NGINX, or apt-get install nginx-light)")
}

// needNginx skips t when nginx is missing, and fails it under CI=true.
func needNginx(t *testing.T) {
	t.Helper()
	if _, err := nginxPath(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI=true requires the nginx checks to run", err)
		}
		t.Skip(err)
	}
}

// nginxWrapper writes, in a new temporary directory, a main configuration whose
// http block holds body, with every path nginx writes (pid, logs, temp files) in
// that directory, so that nginx runs unprivileged. A worker takes up to connections
// connections at once and may open as many files (0: nginx's defaults, 512 and the
// inherited limit). It returns the directory and the configuration's path.
func nginxWrapper(connections int, body string) (dir, conf string, err error) {
	dir, err = os.MkdirTemp("", "roomcast-nginx-")
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pid %s;\nerror_log %s notice;\n", filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"))
	if connections > 0 {
		fmt.Fprintf(&b, "worker_rlimit_nofile %d;\nevents { worker_connections %d; }\n", connections, connections)
	} else {
		b.WriteString("events {}\n")
	}
	b.WriteString("http {\n")
	fmt.Fprintf(&b, "access_log %s;\n", filepath.Join(dir, "access.log"))
	for _, t := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "%s_temp_path %s;\n", t, filepath.Join(dir, t))
	}
	b.WriteString(body)
	b.WriteString("\n}\n")
	conf = filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	return dir, conf, nil
}

// nginxTest runs nginx -t on a wrapper whose http block includes the file at path,
// as deploy/nginx.conf asks to be used.
func nginxTest(path string) error {
	bin, err := nginxPath()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir, conf, err := nginxWrapper(0, "include "+abs+";")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(bin, "-t", "-q", "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return fmt.Errorf("nginx -t rejects %s: %w\n%s%s", path, err, out, bytes.TrimSpace(log))
	}
	return nil
}

func checkNginx(tree *deployTree, _ *deployment) error {
	if tree.nginxConf == "" {
		return nil
	}
	return nginxTest(tree.nginxConf)
}

// listenRE is a listen directive at the start of a line (not a commented one).
var listenRE = regexp.MustCompile(`(?m)^(\s*)listen\s+[^;]*;`)

// checkNginxBodySize runs nginx.conf itself, its listen directives moved to a
// loopback socket, and has nginx answer whether a publish (POST /rooms/…/events)
// may carry --max-body bytes and no more, and a batch (POST /events)
// --max-batch-body. Nothing reaches the upstream: the probes send no body.
func checkNginxBodySize(tree *deployTree, d *deployment) error {
	if tree.nginxConf == "" {
		return nil
	}
	maxBody, maxBatch, err := bodyLimits(tree, d)
	if err != nil {
		return err
	}
	data, err := readBounded(tree.nginxConf)
	if err != nil {
		return err
	}
	if !listenRE.Match(data) {
		return fmt.Errorf("%s: no listen directive", tree.nginxConf)
	}
	server := func(listen string) string {
		return listenRE.ReplaceAllString(string(data), "${1}listen "+listen+";")
	}
	err = nginxBodyLimits(server, []bodyProbe{
		{path: "/rooms/deploy-drift/events", what: "--max-body", want: maxBody},
		{path: "/events", what: "--max-batch-body", want: maxBatch},
	})
	if err != nil {
		return fmt.Errorf("nginx.conf: %w", err)
	}
	return nil
}

// writeNginxCopy writes a copy of the nginx.conf at path with every old replaced by
// new, and returns the copy's path.
func writeNginxCopy(t *testing.T, path, old, new string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s has no %q to break", path, old)
	}
	broken := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(broken, bytes.ReplaceAll(data, []byte(old), []byte(new)), 0o600); err != nil {
		t.Fatal(err)
	}
	return broken
}

// writeBrokenNginx writes a copy of the nginx.conf at path with a directive nginx
// does not know, and returns the copy's path.
func writeBrokenNginx(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(broken, append(data, "\nproxy_bufering off;\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	return broken
}

// bodyProbe asks whether nginx takes a body of want bytes at path and refuses one
// of want+1 bytes, i.e. whether its client_max_body_size there is want bytes.
type bodyProbe struct {
	path string
	what string // the setting, for messages
	want int64
}

// runNginx runs a real nginx on the http block server(listen) until stop is called.
// The listening socket is the test's, on loopback, passed to nginx as an inherited
// socket (the NGINX variable), so it accepts from the start and no port is guessed.
// logs returns nginx's error log, for messages.
func runNginx(server func(listen string) string) (addr string, logs func() string, stop func(), err error) {
	return runNginxSized(0, server)
}

// runNginxSized is runNginx with a worker that holds up to connections connections
// (client and upstream ones both count) and files; 0 keeps nginx's defaults.
func runNginxSized(connections int, server func(listen string) string) (addr string, logs func() string, stop func(), err error) {
	bin, err := nginxPath()
	if err != nil {
		return "", nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return "", nil, nil, err
	}
	defer f.Close()
	dir, conf, err := nginxWrapper(connections, server(ln.Addr().String()))
	if err != nil {
		return "", nil, nil, err
	}
	// A master and one worker: nginx with master_process off ignores inherited
	// sockets.
	cmd := exec.Command(bin, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", conf, "-g", "daemon off; worker_processes 1;")
	cmd.ExtraFiles = []*os.File{f} // fd 3
	cmd.Env = append(os.Environ(), "NGINX=3;")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, fmt.Errorf("start nginx: %w", err)
	}
	logs = func() string {
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(log)
	}
	// SIGTERM has the master stop its worker; SIGKILL only if it does not exit.
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
		_ = cmd.Wait()
		t.Stop()
		os.RemoveAll(dir)
	}
	return ln.Addr().String(), logs, stop, nil
}

// nginxBodyLimits runs nginx on the http block server(listen) and answers each
// probe. Nothing is proxied: a probe announces its body with Expect: 100-continue
// and sends none.
func nginxBodyLimits(server func(listen string) string, probes []bodyProbe) error {
	addr, logs, stop, err := runNginx(server)
	if err != nil {
		return err
	}
	defer stop()
	var errs []error
	for _, p := range probes {
		takes, err1 := nginxTakes(addr, p.path, p.want)
		takesMore, err2 := nginxTakes(addr, p.path, p.want+1)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("nginx: %w\n%s", err, logs())
		}
		if !takes || takesMore {
			errs = append(errs, fmt.Errorf("%s: nginx's body limit is not %s = %d bytes (takes %d bytes: %t; takes %d: %t)",
				p.path, p.what, p.want, p.want, takes, p.want+1, takesMore))
		}
	}
	return errors.Join(errs...)
}

// nginxTakes announces a body of n bytes with Expect: 100-continue and reports
// whether nginx goes on (100 or the location's 204) rather than refusing it with 413;
// no body is sent.
func nginxTakes(addr, path string, n int64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	req := "POST " + path + " HTTP/1.1\r\nHost: roomcast.test\r\nContent-Length: " +
		strconv.FormatInt(n, 10) + "\r\nExpect: 100-continue\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		return false, err
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return false, err
	}
	res.Body.Close()
	switch res.StatusCode {
	case http.StatusContinue, http.StatusNoContent:
		return true, nil
	case http.StatusRequestEntityTooLarge:
		return false, nil
	}
	return false, fmt.Errorf("POST %s with %d bytes: status %d", path, n, res.StatusCode)
}
