package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/roomcast/roomcast/cmd/loadgen/internal/hub"
)

// Exit codes.
const (
	exitOK    = 0
	exitLossy = 1 // a gap, duplicate or out-of-order event that no resync explained
	exitError = 2 // bad flags, or a run that could not start or measured nothing
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return exitError
	}
	// The first SIGINT or SIGTERM ends the run and prints the report; a second one
	// kills the process as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	if cfg.ServeHub != "" {
		if err := serveHub(ctx, cfg.ServeHub, stderr); err != nil {
			fmt.Fprintf(stderr, "loadgen: %v\n", err)
			return exitError
		}
		return exitOK
	}

	if cfg.Scenario == scenarioChaos {
		fl, err := startChaos(&cfg, stdout, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "loadgen: %v\n", err)
			return exitError
		}
		defer fl.stop()
	}
	rep, err := runWith(ctx, cfg, stderr, wantBar(cfg.Bar, stderr))
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return exitError
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return exitError
	}
	rep.Chaos.write(stdout, rep, &cfg)
	if cfg.JSON {
		if err := rep.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "loadgen: %v\n", err)
			return exitError
		}
	}
	// The plots come after the report, so that a plot that cannot be written loses
	// nothing of a long run's figures.
	code := exitOK
	if cfg.PlotDir != "" {
		if err := writePlots(cfg.PlotDir, cfg.Scenario, rep.Timeline); err != nil {
			fmt.Fprintf(stderr, "loadgen: %v\n", err)
			code = exitError
		}
	}
	if why := rep.nothingMeasured(); why != "" {
		fmt.Fprintf(stderr, "loadgen: the run measured nothing: %s\n", why)
		code = exitError
	}
	if why := rep.scenarioFailed(); why != "" {
		// A storm or drain that did not happen tested nothing, whatever the loss.
		fmt.Fprintf(stderr, "loadgen: scenario %s did not run as asked: %s\n", cfg.Scenario, why)
		code = exitError
	}
	if why := rep.unbalanced(); why != "" && code == exitOK {
		fmt.Fprintf(stderr, "loadgen: the pods were not balanced: %s\n", why)
		code = exitLossy
	}
	if rep.Lossy() {
		fmt.Fprintln(stderr, "loadgen: loss detected")
		if rep.Chaos != nil {
			fmt.Fprintf(stderr, "loadgen: rerun the same schedule with -scenario chaos -seed %d -duration %s\n", cfg.Seed, cfg.Duration)
		}
		return exitLossy
	}
	return code
}

// wantBar reports whether the progress is a bar: -bar on, or auto with stderr a
// terminal. The bar only ever goes to stderr, so it never mixes with -json.
func wantBar(mode string, stderr io.Writer) bool {
	switch mode {
	case barOn:
		return true
	case barAuto:
		f, ok := stderr.(*os.File)
		return ok && isTerminal(f)
	}
	return false
}

// serveHub serves the yardstick hub on addr until ctx is done.
func serveHub(ctx context.Context, addr string, log io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve hub: %w", err)
	}
	h := hub.New()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(log, "loadgen: hub listening on %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve hub: %w", err)
	case <-ctx.Done():
	}
	h.Close() // streams end, so Shutdown need not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("serve hub: shutdown: %w", err)
	}
	return nil
}
