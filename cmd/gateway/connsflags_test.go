package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// setOpenFileLimit sets the process's open-file limit, soft and hard, to n.
func setOpenFileLimit(n string) error {
	v, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return err
	}
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: v, Max: v})
}

func TestConnsPerIPFor(t *testing.T) {
	for limit, want := range map[uint64]int{0: 0, 1: 1, 3: 1, 1024: 256, 20000: 5000, 1 << 20: 65536} {
		if got := connsPerIPFor(limit); got != want {
			t.Errorf("connsPerIPFor(%d) = %d, want %d", limit, got, want)
		}
	}
	c, err := parseConfig(nil, noEnvironment, io.Discard)
	if want := connsPerIPFor(openFileLimit()); err != nil || c.MaxConnsPerIP != want || want == 0 {
		t.Fatalf("default --max-conns-per-ip %d, %v; want %d, a quarter of the open-file limit", c.MaxConnsPerIP, err, want)
	}
	for _, tc := range []struct {
		args []string
		env  string
		want int
	}{
		{[]string{"--max-conns-per-ip", "0"}, "", 0},
		{[]string{"--max-conns-per-ip", "7"}, "9", 7},
		{nil, "0", 0},
		{nil, "9", 9},
	} {
		c, err := parseConfig(tc.args, func(k string) string {
			if k == "ROOMCAST_MAX_CONNS_PER_IP" {
				return tc.env
			}
			return ""
		}, io.Discard)
		if err != nil || c.MaxConnsPerIP != tc.want {
			t.Errorf("%q, ROOMCAST_MAX_CONNS_PER_IP=%q: %d, %v; want %d", tc.args, tc.env, c.MaxConnsPerIP, err, tc.want)
		}
	}
}

// TestSlowBodiesLeaveHealthzAnswering: a gateway with a small open-file limit and no
// --max-conns-per-ip caps each address at a quarter of it, so one address that
// starts more request bodies than the limit allows and never finishes them cannot
// take every descriptor: /healthz, from another address, still answers.
func TestSlowBodiesLeaveHealthzAnswering(t *testing.T) {
	const (
		nofile = 256 // the gateway's open-file limit: a cap of 64 per address
		flood  = 400
	)
	p := startForLineWith(t, gatewaytest.Options{
		// The bodies would hold their descriptors for a minute.
		Args: []string{"--body-timeout", "1m"},
		Env:  []string{"ROOMCAST_TEST_NOFILE=" + strconv.Itoa(nofile)},
	})
	if line := startLine(t, p); line["max_conns_per_ip"] != float64(nofile/4) || line["open_file_limit"] != float64(nofile) {
		t.Fatalf("start-up line max_conns_per_ip %v, open_file_limit %v; want %d and %d", line["max_conns_per_ip"], line["open_file_limit"], nofile/4, nofile)
	}
	// The flood comes from 127.0.0.2, /healthz from 127.0.0.1.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	for i := range flood {
		c, err := d.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		// A body that has started and will not finish.
		fmt.Fprintf(c, "POST /rooms/r/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nx")
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	res, err := hc.Get(p.Public + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with %d slow bodies open from one address: %v", flood, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
	replaytest.Eventually(t, 10*time.Second, "every connection over the cap refused", func() error {
		m, err := gatewaytest.Scrape(context.Background(), hc, p.Admin+"/metrics")
		if err != nil {
			return err
		}
		if n := m.Value("roomcast_connections_refused_total"); n != flood-nofile/4 {
			return fmt.Errorf("roomcast_connections_refused_total %v, want %d", n, flood-nofile/4)
		}
		return nil
	})
}
