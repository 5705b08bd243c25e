package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestProgressBarAgainstHub(t *testing.T) {
	srv := startHub(t)
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"-url", srv.URL, "-subs", "4", "-rate", "100", "-warmup", "0s",
		"-duration", "1500ms", "-progress", "200ms", "-bar", "on", "-json"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "\r") {
		t.Errorf("the bar reached stdout:\n%q", stdout.String())
	}
	bar := stderr.String()
	// One line redrawn in place: carriage returns, and a single newline at the end.
	if strings.Count(bar, "\r") < 2 || strings.Count(bar, "\n") != 1 || !strings.HasSuffix(bar, "\n") {
		t.Fatalf("stderr is not one redrawn line:\n%q", bar)
	}
	if !strings.Contains(bar, "/1.5s") || !strings.Contains(bar, "del/s") {
		t.Errorf("the bar lacks elapsed/total or deliveries/s:\n%q", bar)
	}
}

func TestBarLine(t *testing.T) {
	tests := []struct {
		name           string
		elapsed, total time.Duration
		want           string
	}{
		{name: "start", elapsed: 0, total: 10 * time.Second, want: "[" + strings.Repeat(".", barWidth) + "]   0.0s/10s"},
		{name: "half", elapsed: 5 * time.Second, total: 10 * time.Second, want: "[" + strings.Repeat("#", barWidth/2) + strings.Repeat(".", barWidth/2) + "]   5.0s/10s"},
		{name: "over", elapsed: 12 * time.Second, total: 10 * time.Second, want: "[" + strings.Repeat("#", barWidth) + "]  12.0s/10s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := barGauge(tt.elapsed, tt.total); got != tt.want {
				t.Errorf("barGauge = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWantBar(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	tests := []struct {
		name   string
		mode   string
		stderr io.Writer
		want   bool
	}{
		{name: "on draws into anything", mode: barOn, stderr: &bytes.Buffer{}, want: true},
		{name: "off never", mode: barOff, stderr: w},
		{name: "auto not into a buffer", mode: barAuto, stderr: &bytes.Buffer{}},
		{name: "auto not into a pipe", mode: barAuto, stderr: w},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wantBar(tt.mode, tt.stderr); got != tt.want {
				t.Errorf("wantBar(%s) = %v, want %v", tt.mode, got, tt.want)
			}
		})
	}
}
