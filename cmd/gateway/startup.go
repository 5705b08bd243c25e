package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/roomcast/roomcast/gateway"
)

// Log formats of --log-format.
const (
	logAuto = "auto"
	logJSON = "json"
	logText = "text"
)

// textLog reports whether the gateway writes for a person: --log-format text, or
// auto with stderr a terminal.
func (c config) textLog(terminal bool) bool {
	switch strings.ToLower(c.LogFormat) {
	case logText:
		return true
	case logJSON:
		return false
	}
	return terminal
}

// newLogger is the gateway's logger on w: slog's JSON, one object a line, for
// machines; slog's text with a short clock time for a person.
func newLogger(w io.Writer, level slog.Level, text bool) *slog.Logger {
	if !text {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
				return slog.String(slog.TimeKey, a.Value.Time().Format("15:04:05.000"))
			}
			return a
		},
	}))
}

// warning is one thing a start-up warns about: in full for the JSON log, in a short
// line for a person.
type warning struct{ full, short string }

// warnings are the start-up's warnings for a pod whose admin listener is adminAddr.
func (c config) warnings(adminAddr net.Addr) []warning {
	var w []warning
	if c.MaxConnsPerIP == 0 {
		w = append(w, warning{
			"no per-address connection cap (--max-conns-per-ip 0, or an open-file limit that could not be read): one address holding connections open can take every file descriptor",
			"no per-address connection cap (--max-conns-per-ip): one client can take every file descriptor",
		})
	}
	if c.AdminToken == "" && !loopbackAddr(adminAddr) {
		w = append(w, warning{
			"no --admin-token-file: /admin/ and /debug/pprof/ are open to anyone who reaches the admin listener",
			"the admin listener is not on loopback and has no --admin-token-file: anyone who reaches it may drain the pod",
		})
	}
	if !c.Auth.jwtEnabled() {
		w = append(w, warning{
			"no --jwt-key or --jwt-hmac-file: every room can be read without a credential",
			"",
		})
		if c.PublishToken == "" {
			w = append(w, warning{
				"no --publish-token: only loopback clients may publish; behind a local proxy every client looks like loopback, so set a token there",
				"behind a local proxy every client looks like loopback and may publish: set --publish-token there",
			})
		}
	}
	return w
}

// pageURL is the URL a person opens for a listener's page: an unspecified host
// (0.0.0.0, ::) is reached on loopback.
func pageURL(a net.Addr, path string) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String() + path
	}
	host := t.IP.String()
	if t.IP.IsUnspecified() {
		host = "127.0.0.1"
		if t.IP.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(t.Port)) + path
}

// announce writes the start-up for a person: where the pages are, which log the
// pod runs on, what anonymous clients may do, the warnings in short, and how to
// stop. It is one write, so log lines from other goroutines never cut it.
func (c config) announce(w io.Writer, public, admin, metrics net.Addr) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "roomcast gateway started\n\n")
	row := func(k, v string) { fmt.Fprintf(&b, "  %-14s %s\n", k, v) }
	row("demo page", pageURL(public, "/"))
	row("operator page", pageURL(admin, "/"))
	if metrics != nil {
		row("metrics", pageURL(metrics, "/metrics"))
	} else {
		row("metrics", pageURL(admin, "/metrics"))
	}
	if t, ok := public.(*net.TCPAddr); ok && t.IP.IsUnspecified() {
		row("", "(the public listener is open on every interface)")
	}
	b.WriteString("\n")
	if c.Redis == "" {
		row("log", fmt.Sprintf("embedded, in memory: up to %d events a room, lost when the gateway stops", c.History))
	} else {
		t, _ := parseRedis(c.Redis)
		where := strings.Join(t.addrs, ", ")
		if t.tls {
			where += " (TLS)"
		}
		row("log", "Redis at "+where+", pod "+c.podID())
	}
	if c.IdleLoop == gateway.IdleLoopOn.String() {
		row("connections", fmt.Sprintf("idle ones wait on %d event-loop workers, without a goroutine each (--idle-loop on)", runtime.GOMAXPROCS(0)))
	} else {
		row("connections", "a goroutine each (--idle-loop off)")
	}
	for _, l := range c.accessLines(admin) {
		row(l[0], l[1])
	}
	var shorts []string
	for _, x := range c.warnings(admin) {
		if x.short != "" {
			shorts = append(shorts, x.short)
		}
	}
	if len(shorts) > 0 {
		b.WriteString("\n")
		for _, s := range shorts {
			fmt.Fprintf(&b, "  warning: %s\n", s)
		}
	}
	fmt.Fprintf(&b, "\nTo stop, press Ctrl-C: %s.\nPress Ctrl-C a second time to stop at once.\n\n", c.drainPlan())
	_, _ = w.Write(b.Bytes())
}

// accessLines say what clients without a credential may do, and who may use the
// admin listener.
func (c config) accessLines(admin net.Addr) [][2]string {
	var read, publish string
	switch {
	case !c.Auth.jwtEnabled():
		read = "every room, by anyone (no --jwt-key)"
	case c.Auth.AnonymousRooms != "":
		read = "rooms " + c.Auth.AnonymousRooms + " by anyone; every other room needs a JWT"
	default:
		read = "every room needs a JWT (or a ticket from POST /tickets)"
	}
	switch {
	case c.PublishToken != "" && c.Auth.jwtEnabled():
		publish = "needs a --publish-token token or a JWT that grants the room"
	case c.PublishToken != "":
		publish = "needs a --publish-token token"
	case c.Auth.jwtEnabled():
		publish = "needs a JWT that grants the room"
	default:
		publish = "only from loopback (127.0.0.1, ::1), without a token (no --publish-token)"
	}
	adm := "open, on loopback only"
	switch {
	case c.AdminToken != "":
		adm = "needs the --admin-token-file token (/metrics stays open)"
	case !loopbackAddr(admin):
		adm = "open to anyone who reaches it"
	}
	return [][2]string{{"reading", read}, {"publishing", publish}, {"admin", adm}}
}

// drainPlan says what a first Ctrl-C (or SIGTERM) does.
func (c config) drainPlan() string {
	switch {
	case c.DrainDelay > 0 && c.DrainWindow > 0:
		return fmt.Sprintf("the gateway serves %s more, then closes streams over up to %s",
			fmtDuration(c.DrainDelay), fmtDuration(c.DrainWindow))
	case c.DrainDelay > 0:
		return fmt.Sprintf("the gateway serves %s more, then closes every stream", fmtDuration(c.DrainDelay))
	case c.DrainWindow > 0:
		return fmt.Sprintf("the gateway closes streams over up to %s", fmtDuration(c.DrainWindow))
	}
	return "the gateway closes every stream and stops"
}

// drainingNote is the line a person sees on the first signal.
func (c config) drainingNote(sig string) string {
	d := c.DrainDelay + c.DrainWindow
	if d <= 0 {
		return fmt.Sprintf("%s: closing every stream and stopping\n", sig)
	}
	return fmt.Sprintf("%s: draining for up to %s; press Ctrl-C again to stop now\n", sig, fmtDuration(d.Round(time.Millisecond)))
}
