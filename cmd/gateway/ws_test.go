package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestWSPingFlag(t *testing.T) {
	c, err := parseConfig(nil, noEnvironment, io.Discard)
	if err != nil || c.WSPing != 20*time.Second {
		t.Fatalf("default --ws-ping %s (%v), want 20s", c.WSPing, err)
	}
	c, err = parseConfig(nil, func(k string) string {
		if k == "ROOMCAST_WS_PING" {
			return "5s"
		}
		return ""
	}, io.Discard)
	if err != nil || c.WSPing != 5*time.Second {
		t.Fatalf("ROOMCAST_WS_PING=5s gave %s (%v)", c.WSPing, err)
	}
	for _, v := range []string{"1s", "10m"} {
		if err := checkConfig([]string{"--ws-ping", v}, noEnvironment); err != nil {
			t.Errorf("--ws-ping %s rejected: %v", v, err)
		}
	}
	for _, v := range []string{"0", "999ms", "11m"} {
		err := checkConfig([]string{"--ws-ping", v}, noEnvironment)
		if err == nil || !strings.Contains(err.Error(), "--ws-ping") {
			t.Errorf("--ws-ping %s: %v, want a refusal naming the flag", v, err)
		}
	}
}
