package gatewaytest

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Redaction: every log line a test binary's gateways write (in-process through
// Logger, child processes through Launch) is kept, and every credential the tests
// make (Secret) is looked for in them at the end (CheckRedaction). A token, ticket,
// password or key that reaches a log fails the suite.

// maxCaptured bounds the log bytes kept for the check.
const maxCaptured = 256 << 20

// Redactor keeps log lines and secrets, and finds the secrets in the lines. The
// package-level functions use one Redactor for the whole test binary.
type Redactor struct {
	mu       sync.Mutex
	secrets  map[string]string // secret → what it is
	logs     bytes.Buffer
	overflow bool
}

var redaction Redactor

// Secret registers s, a credential described by what, as something no log may
// contain, and returns it. Strings shorter than 8 bytes are not registered: they
// would match by chance.
func Secret(what, s string) string { return redaction.Secret(what, s) }

// Secret is the package-level Secret on r.
func (r *Redactor) Secret(what, s string) string {
	if len(s) < 8 {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]string{}
	}
	r.secrets[s] = what
	return s
}

// Write keeps the lines of p for Check.
func (r *Redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if r.logs.Len()+len(line)+1 > maxCaptured {
			r.overflow = true
			continue
		}
		r.logs.Write(line)
		r.logs.WriteByte('\n')
	}
	return len(p), nil
}

// captureLog keeps one log line for CheckRedaction.
func captureLog(line []byte) { _, _ = redaction.Write(line) }

// LogWriter is a writer whose lines CheckRedaction searches.
func LogWriter() io.Writer { return &redaction }

// Logger is a JSON logger, at debug level, whose lines CheckRedaction searches:
// give it to the gateways a test runs in-process.
func Logger() *slog.Logger { return redaction.Logger() }

// Logger is the package-level Logger on r.
func (r *Redactor) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// CheckRedaction searches every captured log line for every registered secret and
// describes each one it finds (never printing the secret itself); nil when none is
// found. Call it from TestMain after m.Run.
func CheckRedaction() error { return redaction.Check() }

// Check is the package-level CheckRedaction on r.
func (r *Redactor) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	logs := r.logs.Bytes()
	var found []string
	for s, what := range r.secrets {
		if i := bytes.Index(logs, []byte(s)); i >= 0 {
			start := bytes.LastIndexByte(logs[:i], '\n') + 1
			msg := logs[start:i]
			if len(msg) > 120 {
				msg = msg[:120]
			}
			found = append(found, fmt.Sprintf("%s in a log line beginning %q", what, msg))
		}
	}
	if len(found) == 0 {
		if r.overflow {
			return fmt.Errorf("gatewaytest: more than %d bytes of logs: the rest was not searched", maxCaptured)
		}
		return nil
	}
	sort.Strings(found)
	return fmt.Errorf("gatewaytest: %d secrets reached the logs:\n%s", len(found), strings.Join(found, "\n"))
}

// Captured reports how many log bytes and secrets CheckRedaction would search.
func Captured() (logBytes, secrets int) {
	redaction.mu.Lock()
	defer redaction.mu.Unlock()
	return redaction.logs.Len(), len(redaction.secrets)
}

// RedactionMain runs a test binary's tests and then CheckRedaction, which fails the
// run when a secret reached a log. Use it in TestMain: os.Exit(gatewaytest.RedactionMain(m)).
func RedactionMain(run func() int) int {
	code := run()
	if err := CheckRedaction(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	if testing.Verbose() {
		n, k := Captured()
		fmt.Fprintf(os.Stderr, "redaction: %d log bytes searched for %d secrets\n", n, k)
	}
	return code
}
