package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// StormResult is what the storm scenario measured: every stream ended at once, and
// how fast the subscribers were all back, resumed from their Last-Event-ID.
type StormResult struct {
	Via string `json:"via"`
	// AtSeconds is when the storm began, in seconds into the measured window.
	AtSeconds float64 `json:"at_seconds"`
	// Ended counts the streams ended: the shed answers' "closed", or the streams the
	// subscribers closed themselves.
	Ended int64 `json:"ended"`
	// Reconnected counts the subscribers whose stream was open when the storm began
	// and that have connected again since.
	Reconnected int64 `json:"reconnected"`
	// ReconnectSeconds runs from the storm to the last of those reconnects;
	// ReconnectsPerSec is Reconnected over it.
	ReconnectSeconds float64 `json:"reconnect_seconds"`
	ReconnectsPerSec float64 `json:"reconnects_per_sec"`
	Error            string  `json:"error,omitempty"`
}

// stormState follows the storm's reconnects; loadState.connMu guards it.
type stormState struct {
	pending, armed int
	start, last    time.Time
	done           chan struct{}
}

// reconnected counts one subscriber back after the storm.
func (st *stormState) reconnected(now time.Time) {
	st.pending--
	st.last = now
	if st.pending == 0 {
		close(st.done)
	}
}

// runStorm waits cfg.StormAt into the measured window, ends every open stream,
// and waits (up to -connect-timeout) for them all to come back.
func runStorm(ctx context.Context, ls *loadState, subs []*subscriber, admin *http.Client, windowStart time.Time) *StormResult {
	cfg := ls.cfg
	res := &StormResult{Via: cfg.StormVia}
	if !waitFor(ctx, nil, time.Until(windowStart.Add(cfg.StormAt))) {
		return res
	}
	ls.connMu.Lock()
	st := &ls.storm
	st.start, st.done, st.pending = time.Now(), make(chan struct{}), 0
	for _, s := range subs {
		if !s.open {
			continue
		}
		s.stormPending = true
		st.pending++
		if cfg.StormVia == stormClient {
			s.kicked = true
			s.cancelConn()
		}
	}
	st.armed = st.pending
	if st.pending == 0 {
		close(st.done)
	}
	done := st.done
	res.AtSeconds = st.start.Sub(windowStart).Seconds()
	ls.connMu.Unlock()

	if cfg.StormVia == stormClient {
		res.Ended = int64(st.armed)
	} else {
		for _, a := range cfg.AdminURLs {
			n, err := shed(ctx, admin, a, cfg.AdminToken, cfg.Subs)
			res.Ended += int64(n)
			if err != nil && res.Error == "" {
				res.Error = err.Error()
			}
		}
	}
	waitFor(ctx, done, cfg.ConnectTimeout)

	ls.connMu.Lock()
	defer ls.connMu.Unlock()
	res.Reconnected = int64(st.armed - st.pending)
	if res.Reconnected > 0 {
		res.ReconnectSeconds = st.last.Sub(st.start).Seconds()
		if res.ReconnectSeconds > 0 {
			res.ReconnectsPerSec = float64(res.Reconnected) / res.ReconnectSeconds
		}
	}
	// Subscribers not back yet stop counting for a storm that is over.
	for _, s := range subs {
		s.stormPending = false
	}
	st.pending = 0
	return res
}

// adminTimeout bounds one admin request.
const adminTimeout = 10 * time.Second

// shed asks the pod behind adminURL to end up to n streams and returns how many it
// closed.
func shed(ctx context.Context, c *http.Client, adminURL, token string, n int) (int, error) {
	var out struct {
		Closed int `json:"closed"`
	}
	if err := adminPost(ctx, c, adminURL+"/admin/shed?count="+strconv.Itoa(n), token, &out); err != nil {
		return 0, err
	}
	return out.Closed, nil
}

// adminPost POSTs to an admin route and decodes its JSON answer into out.
func adminPost(ctx context.Context, c *http.Client, url, token string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return fmt.Errorf("admin %s: %w", url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("admin %s: read answer: %w", url, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("admin %s: status %d: %.200s", url, resp.StatusCode, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("admin %s: answer: %w", url, err)
		}
	}
	return nil
}
