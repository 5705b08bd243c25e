package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
)

// readRSS returns the resident set size of process pid in KiB, from /proc.
func readRSS(pid int) (int64, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	defer f.Close()
	return parseRSS(f, path)
}

func parseRSS(f io.Reader, path string) (int64, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0, fmt.Errorf("rss: %s: unexpected VmRSS line %q", path, sc.Text())
		}
		kib, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rss: %s: %w", path, err)
		}
		return kib, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("rss: %s: %w", path, err)
	}
	return 0, fmt.Errorf("rss: %s: no VmRSS line", path)
}
