package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// DrainResult is one pod drained by the rolling-drain scenario.
type DrainResult struct {
	URL string `json:"url"`
	// Moved counts the streams the pod held when its drain began; they all had to
	// resume on the other pods.
	Moved int64 `json:"moved"`
	// Seconds runs from the drain request to the pod's last stream ending.
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// maxDrainOutput bounds what a -drain-cmd may print that the report keeps.
const maxDrainOutput = 4 << 10

// drainPoll is how often the rolling drain looks at a draining pod's open streams.
const drainPoll = 20 * time.Millisecond

// runRollingDrain drains the pods one at a time while the load runs: each is taken
// out of rotation (no new streams or publishes go to it), drained (POST
// <admin>/admin/drain, or -drain-cmd), and followed until its last stream has ended
// and moved to another pod, bounded by -drain-wait. A pod drained through the admin
// API stays out (its process exits); after -drain-cmd it is put back, since the
// command is expected to return once a replacement serves the URL.
func runRollingDrain(ctx context.Context, ls *loadState, admin *http.Client) []DrainResult {
	cfg := ls.cfg
	n := len(cfg.AdminURLs)
	if cfg.DrainCmd != "" {
		n = len(cfg.URLs)
	}
	results := make([]DrainResult, 0, n)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		results = append(results, drainPod(ctx, ls, admin, i))
	}
	return results
}

func drainPod(ctx context.Context, ls *loadState, admin *http.Client, i int) DrainResult {
	cfg := ls.cfg
	p := ls.pods
	res := DrainResult{URL: cfg.URLs[i]}
	p.out[i].Store(true)
	res.Moved = p.open[i].Load()
	start := time.Now()
	var err error
	if cfg.DrainCmd != "" {
		err = runDrainCmd(ctx, cfg, i)
	} else {
		err = adminPost(ctx, admin, cfg.AdminURLs[i]+"/admin/drain", cfg.AdminToken, nil)
	}
	if err == nil {
		err = waitDrained(ctx, p, i, cfg.DrainWait)
	}
	res.Seconds = time.Since(start).Seconds()
	if err != nil {
		res.Error = err.Error()
		res.Moved = 0 // nothing is known to have moved
	}
	if cfg.DrainCmd != "" {
		p.out[i].Store(false)
	}
	return res
}

// waitDrained waits until pod i holds no stream of ours.
func waitDrained(ctx context.Context, p *pods, i int, within time.Duration) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for p.open[i].Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("drain %s: %d streams still open after %s", p.urls[i], p.open[i].Load(), within)
		case <-tick.C:
		}
	}
	return nil
}

// runDrainCmd runs -drain-cmd for pod i through sh -c, with the pod in its
// environment.
func runDrainCmd(ctx context.Context, cfg *Config, i int) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", cfg.DrainCmd)
	admin := ""
	if i < len(cfg.AdminURLs) {
		admin = cfg.AdminURLs[i]
	}
	cmd.Env = append(os.Environ(),
		"ROOMCAST_POD_URL="+cfg.URLs[i],
		"ROOMCAST_POD_ADMIN_URL="+admin,
		"ROOMCAST_POD_INDEX="+strconv.Itoa(i))
	out := &cappedBuffer{max: maxDrainOutput}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("drain %s: -drain-cmd: %w: %s", cfg.URLs[i], err, bytes.TrimSpace(out.buf.Bytes()))
	}
	return nil
}

// cappedBuffer keeps the first max bytes written to it and drops the rest.
type cappedBuffer struct {
	buf bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
