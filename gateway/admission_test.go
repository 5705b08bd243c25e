package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// turnedAway asserts that the stream was answered 200, a retry hint in the longer
// range and an end, with nothing else.
func turnedAway(t *testing.T, s *stream, cfg gateway.Config) {
	t.Helper()
	frames := s.waitEnd()
	lo, hi := 2*int(cfg.RetryMin.Milliseconds()), 2*int(cfg.RetryMax.Milliseconds())
	if s.res.StatusCode != http.StatusOK || len(frames) != 1 || frames[0].retry < lo || frames[0].retry > hi {
		t.Fatalf("status %d, frames %+v; want 200 and one retry hint in [%d, %d]", s.res.StatusCode, frames, lo, hi)
	}
}

func TestAdmissionRate(t *testing.T) {
	cfg := gateway.Config{AcceptRate: 0.001, AcceptBurst: 3, RetryMin: time.Second, RetryMax: 2 * time.Second}
	p := newPod(t, podConfig{gw: cfg})
	for i := 0; i < 3; i++ {
		s := p.subscribe(t, "r", "")
		if f, _ := s.nextAny(); f.retry < 1000 || f.retry > 2000 {
			t.Fatalf("stream %d: %+v", i, f)
		}
	}
	turnedAway(t, p.subscribe(t, "r", ""), cfg)
	if p.metrics(t).Value("roomcast_streams_rejected_total", "reason", "rate") != 1 {
		t.Fatal("the rejection was not counted")
	}
	if p.rooms.Len() != 3 {
		t.Fatalf("%d members, want 3", p.rooms.Len())
	}
}

func TestAdmissionCapacity(t *testing.T) {
	cfg := gateway.Config{MaxStreams: 2, RetryMin: time.Second, RetryMax: 2 * time.Second}
	p := newPod(t, podConfig{gw: cfg})
	a := p.subscribe(t, "r", "")
	a.nextAny()
	b := p.subscribe(t, "r", "")
	b.nextAny()
	turnedAway(t, p.subscribe(t, "r", ""), cfg)
	a.close()
	replaytest.Eventually(t, 10*time.Second, "a place freed", func() bool { return p.rooms.Len() == 1 })
	c := p.subscribe(t, "r", "")
	if f, _ := c.nextAny(); f.retry < 1000 || f.retry > 2000 {
		t.Fatalf("after a stream ended the next one was not admitted: %+v", f)
	}
}

func TestAdmissionPerClientIP(t *testing.T) {
	cfg := gateway.Config{MaxStreamsPerIP: 1, ClientIPHeader: "X-Forwarded-For", RetryMin: time.Second, RetryMax: 2 * time.Second}
	p := newPod(t, podConfig{gw: cfg})
	// The nearest proxy appends the address it saw: a client cannot pick the last entry.
	one := p.subscribe(t, "r", "", "X-Forwarded-For", "6.6.6.6, 10.0.0.1")
	one.nextAny()
	two := p.subscribe(t, "r", "", "X-Forwarded-For", "10.0.0.2")
	two.nextAny()
	turnedAway(t, p.subscribe(t, "r", "", "X-Forwarded-For", "7.7.7.7, 10.0.0.1"), cfg)

	peer := newPod(t, podConfig{gw: gateway.Config{MaxStreamsPerIP: 1, RetryMin: time.Second, RetryMax: 2 * time.Second}})
	first := peer.subscribe(t, "r", "", "X-Forwarded-For", "1.1.1.1")
	first.nextAny()
	// Without a trusted header the peer address counts, whatever the header says.
	turnedAway(t, peer.subscribe(t, "r", "", "X-Forwarded-For", "2.2.2.2"), cfg)

	// Unless the peer is loopback and loopback is uncapped: the machine itself, or a
	// proxy on it in front of every client.
	local := newPod(t, podConfig{gw: gateway.Config{MaxStreamsPerIP: 1, LoopbackUncapped: true, RetryMin: time.Second, RetryMax: 2 * time.Second}})
	for range 3 {
		expectAnchor(t, local.subscribe(t, "r", ""))
	}
	// A trusted header turns the exemption off: the forwarded address counts.
	fwd := newPod(t, podConfig{gw: gateway.Config{MaxStreamsPerIP: 1, LoopbackUncapped: true, ClientIPHeader: "X-Forwarded-For", RetryMin: time.Second, RetryMax: 2 * time.Second}})
	expectAnchor(t, fwd.subscribe(t, "r", "", "X-Forwarded-For", "3.3.3.3"))
	turnedAway(t, fwd.subscribe(t, "r", "", "X-Forwarded-For", "3.3.3.3"), cfg)
}

// TestAdmissionClientIPHeaderValues: the per-address cap counts the trusted header's
// last entry only when it is an IP address (with or without a port); anything else
// counts as the peer's address, not as an address of its own. An IPv6 address counts
// by its /64.
func TestAdmissionClientIPHeaderValues(t *testing.T) {
	cfg := gateway.Config{MaxStreamsPerIP: 1, ClientIPHeader: "X-Forwarded-For", RetryMin: time.Second, RetryMax: 2 * time.Second}
	p := newPod(t, podConfig{gw: cfg})
	admitted := func(xff string) {
		t.Helper()
		expectAnchor(t, p.subscribe(t, "r", "", "X-Forwarded-For", xff))
	}
	refused := func(xff string) {
		t.Helper()
		turnedAway(t, p.subscribe(t, "r", "", "X-Forwarded-For", xff), cfg)
	}
	// Names and junk are the peer (127.0.0.1): the first takes its place.
	admitted("10.0.0.1, not-an-address")
	refused("unknown")
	refused("10.0.0.2, 999.1.1.1")
	refused("127.0.0.1")
	// An address with a port is the address.
	admitted("10.0.0.5:4711")
	refused("10.0.0.5")
	// IPv6 by /64.
	admitted("2001:db8:1:2::1")
	refused("[2001:db8:1:2::99]:80")
	admitted("2001:db8:1:3::1")
}
