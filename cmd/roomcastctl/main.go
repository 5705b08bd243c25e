package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1 // the server answered an error; tail saw a resync
	exitUsage       = 2 // bad flags or arguments, an unreadable credential
	exitUnreachable = 3 // no answer from the server
)

func main() {
	// The first SIGINT or SIGTERM ends the command (tail exits 0); a second one kills
	// the process as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

// stdio is what a command reads and writes besides the network.
type stdio struct {
	in     io.Reader
	out    io.Writer
	err    io.Writer
	getenv func(string) string
}

// command is one subcommand.
type command struct {
	name     string
	args     string // the positional arguments, for the usage line
	summary  string // one line
	detail   string // paragraphs after the usage line
	examples string
	// flags registers the command's own flags; nil for none.
	flags func(fs *flag.FlagSet)
	// run does the work with the positional arguments.
	run func(ctx context.Context, c *cli, args []string) error
}

// commands returns the subcommands, each with fresh flag variables.
func commands() map[string]*command {
	list := []*command{tailCommand(), publishCommand(), statsCommand(), roomsCommand(),
		drainCommand(), shedCommand(), ticketCommand(), wsCommand(), clientCommand()}
	m := make(map[string]*command, len(list))
	for _, c := range list {
		m[c.name] = c
	}
	return m
}

const topUsage = `usage: roomcastctl [global flags] COMMAND [flags] [arguments]

roomcastctl follows, publishes to and operates roomcast gateways.

Commands:
%s
Global flags (also accepted after COMMAND):
%s
Exit codes: 0 ok; 1 the operation failed (the server answered an error, tail saw a
resync); 2 usage error; 3 the server could not be reached.

Examples:
  roomcastctl tail chat-42
  roomcastctl publish chat-42 '{"text":"hello"}'
  ROOMCASTCTL_ADMIN_TOKEN=... roomcastctl --admin-url http://10.0.0.7:9090 stats
  roomcastctl rooms --prefix team- --limit 10 --json

Run 'roomcastctl COMMAND --help' for a command's flags and examples.
`

func topHelp(w io.Writer) {
	cmds := commands()
	names := make([]string, 0, len(cmds)+1)
	for n := range cmds {
		names = append(names, n)
	}
	names = append(names, "plan")
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		s := "capacity planner: pods, Redis and egress for a workload"
		if c, ok := cmds[n]; ok {
			s = c.summary
		}
		fmt.Fprintf(&b, "  %-8s %s\n", n, s)
	}
	fs := flag.NewFlagSet("roomcastctl", flag.ContinueOnError)
	var g globals
	g.register(fs)
	var fb strings.Builder
	fs.SetOutput(&fb)
	fs.PrintDefaults()
	fmt.Fprintf(w, topUsage, b.String(), fb.String())
}

// newFlagSet is a flag set that prints nothing by itself: the caller prints a bad
// flag's error once, with where to read the usage (the flag package would print it
// as well).
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// run runs one invocation and returns its exit code.
func run(ctx context.Context, args []string, io stdio) int {
	var g globals
	fs := newFlagSet("roomcastctl")
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			topHelp(io.out)
			return exitOK
		}
		fmt.Fprintf(io.err, "roomcastctl: %v\nrun 'roomcastctl --help' for usage\n", err)
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 {
		topHelp(io.err)
		return exitUsage
	}
	name, rest := rest[0], rest[1:]
	switch name {
	case "help":
		if len(rest) == 0 {
			topHelp(io.out)
			return exitOK
		}
		return run(ctx, []string{rest[0], "--help"}, io)
	case "plan":
		return runPlan(rest, g, io.out, io.err)
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(io.err, "roomcastctl: unknown command %q\nrun 'roomcastctl --help' for the commands\n", name)
		return exitUsage
	}
	return runCommand(ctx, cmd, g, rest, io)
}

func runCommand(ctx context.Context, cmd *command, g globals, args []string, io stdio) int {
	var local globals
	fs := newFlagSet("roomcastctl " + cmd.name)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	local.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandHelp(io.out, cmd, fs)
			return exitOK
		}
		fmt.Fprintf(io.err, "roomcastctl %s: %v\nrun 'roomcastctl %s --help' for usage\n", cmd.name, err, cmd.name)
		return exitUsage
	}
	c, err := newCLI(g.merge(local), io)
	if err == nil {
		defer c.close()
		err = cmd.run(ctx, c, pos)
	}
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	fmt.Fprintf(io.err, "roomcastctl %s: %v\n", cmd.name, err)
	if code == exitUsage {
		fmt.Fprintf(io.err, "run 'roomcastctl %s --help' for usage\n", cmd.name)
	}
	return code
}

func commandHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: roomcastctl %s [flags] %s\n\n%s\n", cmd.name, cmd.args, cmd.summary)
	if cmd.detail != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cmd.detail))
	}
	fmt.Fprintf(w, "\nFlags (global ones included):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(cmd.examples, "\n"))
}

// parseInterspersed parses flags placed before, between and after the positional
// arguments (tail ROOM --from 3 as well as tail --from 3 ROOM) and returns the
// positional ones. After "--" everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usageError is a mistake in the invocation: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitCode maps a command's error to the exit code.
func exitCode(err error) int {
	var ue *usageError
	var ne *unreachableError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ne):
		return exitUnreachable
	}
	return exitFailed
}
