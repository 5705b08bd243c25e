package redistest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/roomcast/roomcast/replay/polltest"
)

// Link faults: a Proxy is a toxiproxy proxy (the library, in this process) on a free
// loopback port in front of one Redis address. Whoever dials Proxy.Addr reaches the
// server through it, and the proxy's toxics shape every connection it carries, those
// open now and those opened later: Blackhole (bytes dropped both ways, no FIN),
// Latency (delay with jitter), Bandwidth (a rate cap) and ResetPeer (an RST). Each
// returns the function that removes it; removing a Blackhole closes the connections
// it held (toxiproxy ends a link whose timeout toxic goes away).
//
// rueidis carries a client's commands and its subscriptions over the same
// connections (one per node of a cluster, a few to a standalone server), so a
// proxy faults both together: no address tells them apart.
//
// A proxy cannot tell its clients apart, so a client that must stay clean while
// another's link fails dials a proxy of its own: a standalone server takes any
// number of proxies (Proxied). A cluster names its nodes' addresses in CLUSTER
// SLOTS and in MOVED answers, and clients follow those, so ProxyCluster puts one
// proxy before each node and makes each node announce its proxy's port
// (cluster-announce-port): every client of that cluster then reaches every node
// through the proxies, after any redirection, and a toxic on a node's proxy faults
// every client's link to that node.

// toxiServer is the toxiproxy server every Proxy of this process belongs to; its API
// listener is never started.
var toxiServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	// Some toxics log through zerolog's global logger: this process has no other
	// use for it.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
})

var proxySeq atomic.Int64

// Proxy is a toxiproxy proxy on loopback in front of one Redis address.
type Proxy struct {
	// Addr is "127.0.0.1:<port>", the address clients dial; Port its port.
	Addr string
	Port int
	// Upstream is the address it forwards to.
	Upstream string

	p *toxiproxy.Proxy
}

// Proxied puts a new proxy in front of s for t, stopped when t ends. Call it once
// per client whose link is to fail on its own.
func Proxied(t testing.TB, s *Server) *Proxy {
	t.Helper()
	return NewProxy(t, s.Addr)
}

// NewProxy puts a proxy in front of upstream for t, stopped when t ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p, err := newProxy(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.p.Stop)
	return p
}

func newProxy(upstream string) (*Proxy, error) {
	name := "redis-" + strconv.FormatInt(proxySeq.Add(1), 10)
	tp := toxiproxy.NewProxy(toxiServer(), name, "127.0.0.1:0", upstream)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("redistest: proxy before %s: %w", upstream, err)
	}
	_, port, _ := strings.Cut(tp.Listen, ":")
	n, err := strconv.Atoi(port)
	if err != nil {
		tp.Stop()
		return nil, fmt.Errorf("redistest: proxy before %s listens on %q", upstream, tp.Listen)
	}
	return &Proxy{Addr: tp.Listen, Port: n, Upstream: upstream, p: tp}, nil
}

// Stream names the direction a toxic shapes: Downstream is what the server sends
// the client, Upstream what the client sends the server.
type Stream string

const (
	Downstream Stream = "downstream"
	Upstream   Stream = "upstream"
)

var toxicSeq atomic.Int64

// Toxic adds a toxic of type typ (a toxiproxy toxic: "timeout", "latency",
// "bandwidth", "reset_peer", "slicer", "limit_data", "slow_close") with attrs to
// the given streams (both when none is named) and returns what removes it again.
// The remover may be called more than once; t's cleanup calls it too.
func (p *Proxy) Toxic(t testing.TB, typ string, attrs map[string]any, streams ...Stream) (remove func()) {
	t.Helper()
	remove, err := p.AddToxic(typ, attrs, streams...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return remove
}

// AddToxic is Toxic for a program that is not a test: the caller removes the toxic.
func (p *Proxy) AddToxic(typ string, attrs map[string]any, streams ...Stream) (remove func(), err error) {
	if len(streams) == 0 {
		streams = []Stream{Upstream, Downstream}
	}
	var names []string
	var once sync.Once
	remove = func() {
		once.Do(func() {
			for _, name := range names {
				// An error means the toxic is gone already (the proxy stopped).
				_ = p.p.Toxics.RemoveToxic(context.Background(), name)
			}
		})
	}
	for _, s := range streams {
		name := fmt.Sprintf("%s-%s-%d", typ, s, toxicSeq.Add(1))
		body, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": s, "toxicity": 1.0, "attributes": attrs})
		if err != nil {
			remove()
			return nil, fmt.Errorf("redistest: toxic %s: %w", typ, err)
		}
		if _, err := p.p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
			remove()
			return nil, fmt.Errorf("redistest: toxic %s on the proxy before %s: %w", typ, p.Upstream, err)
		}
		names = append(names, name)
	}
	return remove, nil
}

// Stop closes the proxy and every connection through it.
func (p *Proxy) Stop() { p.p.Stop() }

// Blackhole drops every byte both ways on every connection, and sends no FIN: a
// link that went silent (a partition, a dead NAT entry, a paused VM). New
// connections are accepted and then hear nothing either.
func (p *Proxy) Blackhole(t testing.TB) (remove func()) {
	t.Helper()
	return p.Toxic(t, "timeout", map[string]any{"timeout": 0})
}

// Latency delays what the given streams carry (both when none is named) by
// latency plus or minus jitter, in order.
func (p *Proxy) Latency(t testing.TB, latency, jitter time.Duration, streams ...Stream) (remove func()) {
	t.Helper()
	return p.Toxic(t, "latency", map[string]any{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()}, streams...)
}

// Bandwidth caps stream s at kbps kilobytes per second.
func (p *Proxy) Bandwidth(t testing.TB, s Stream, kbps int) (remove func()) {
	t.Helper()
	return p.Toxic(t, "bandwidth", map[string]any{"rate": kbps}, s)
}

// ResetPeer ends every connection with an RST after timeout (at once when 0), and
// every new one likewise.
func (p *Proxy) ResetPeer(t testing.TB, timeout time.Duration) (remove func()) {
	t.Helper()
	return p.Toxic(t, "reset_peer", map[string]any{"timeout": timeout.Milliseconds()}, Upstream)
}

// ClusterProxies are the proxies before every node of a cluster.
type ClusterProxies struct {
	c       *Cluster
	byNode  map[*Node]*Proxy
	ordered []*Proxy
}

// ProxyCluster puts a proxy before every node of c (a cluster of t's own, from
// StartCluster: it is reconfigured) and makes every node announce its proxy's port
// (cluster-announce-port; the bus keeps its real port), then waits until every node
// names only proxies in CLUSTER SLOTS. From then on every client of c, whatever seed
// it was given, reaches every node through its proxy.
func ProxyCluster(t testing.TB, c *Cluster) *ClusterProxies {
	t.Helper()
	cp, err := TryProxyCluster(c)
	if cp != nil {
		t.Cleanup(cp.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TryProxyCluster is ProxyCluster for a program that is not a test: the caller
// stops the proxies (Stop), also when it returns an error with them.
func TryProxyCluster(c *Cluster) (*ClusterProxies, error) {
	cp := &ClusterProxies{c: c, byNode: map[*Node]*Proxy{}}
	for _, n := range c.nodes {
		p, err := newProxy(n.Addr)
		if err != nil {
			return cp, err
		}
		cp.byNode[n] = p
		cp.ordered = append(cp.ordered, p)
	}
	for _, n := range c.nodes {
		p := cp.byNode[n]
		if _, err := n.Do("CONFIG", "SET",
			"cluster-announce-bus-port", strconv.Itoa(n.BusPort),
			"cluster-announce-port", strconv.Itoa(p.Port)); err != nil {
			return cp, fmt.Errorf("redistest: announce %s as %s: %w", n.Addr, p.Addr, err)
		}
	}
	err := polltest.Until(30*time.Second, func() error {
		for _, n := range c.live() {
			out, err := n.Do("CLUSTER", "SLOTS")
			if err != nil {
				return err
			}
			for _, m := range c.nodes {
				if strings.Contains("\n"+out+"\n", "\n"+strconv.Itoa(m.Port)+"\n") {
					return fmt.Errorf("%s still names %s in CLUSTER SLOTS", n.Addr, m.Addr)
				}
			}
			for _, p := range cp.ordered {
				if !strings.Contains(out, strconv.Itoa(p.Port)) {
					return fmt.Errorf("%s does not name proxy %s in CLUSTER SLOTS yet", n.Addr, p.Addr)
				}
			}
		}
		return nil
	})
	if err != nil {
		return cp, fmt.Errorf("redistest: cluster behind proxies: %w", err)
	}
	return cp, nil
}

// Stop closes every proxy of the cluster.
func (cp *ClusterProxies) Stop() {
	for _, p := range cp.ordered {
		p.Stop()
	}
}

// For returns the proxy before n.
func (cp *ClusterProxies) For(n *Node) *Proxy { return cp.byNode[n] }

// All returns every proxy, in the cluster's node order.
func (cp *ClusterProxies) All() []*Proxy { return append([]*Proxy(nil), cp.ordered...) }

// Addrs returns every proxy's address: seeds that reach the cluster through them.
func (cp *ClusterProxies) Addrs() []string {
	out := make([]string, len(cp.ordered))
	for i, p := range cp.ordered {
		out[i] = p.Addr
	}
	return out
}
