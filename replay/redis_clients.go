package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// clientNamePrefix starts the name every connection of a RedisLog gives itself
// (CLIENT SETNAME, sent within HELLO): "roomcast:<pod id>". Redis lists it in CLIENT
// LIST, so an operator, and the log's own sampler, can tell a pod's connections
// from others'.
const clientNamePrefix = "roomcast:"

// clientName is the connection name for cfg: the prefix and the pod id, or, without
// a valid pod id, a random one (unique among the pods of one Redis, so that the
// sampler finds its own connections only).
func clientName(podID string) string {
	if ValidPodID(podID) {
		return clientNamePrefix + podID
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return clientNamePrefix + "~" + hex.EncodeToString(b[:])
}

// maxClientListBytes bounds how much of one node's CLIENT LIST answer a sample
// parses (a line is about 300 bytes: some 25,000 pubsub connections).
const maxClientListBytes = 8 << 20

// RedisClients is what Redis said, at the log's last sample, about this pod's own
// subscriber connections: those CLIENT LIST TYPE pubsub lists under the log's
// connection name with at least one subscription. A cluster holds one per node
// that serves a subscribed room (rueidis keeps one connection per cluster node); a
// standalone server up to four (rueidis spreads a single server's subscriptions
// over its four pipelined connections).
type RedisClients struct {
	// Sampled is false until the first sample, and while Redis refuses CLIENT
	// LIST to the log's user (then every other field is zero).
	Sampled bool
	// At is when the sample ended.
	At time.Time
	// Up counts the pod's subscriber connections Redis lists, over every node.
	Up int
	// Down counts the nodes that should hold one (a primary that serves the slot of a
	// subscribed room; the standalone server while any room is subscribed) and list
	// none, or did not answer.
	Down int
	// Nodes is the number of nodes that answered.
	Nodes int
	// MaxOutputBuffer is the largest output buffer (omem: bytes Redis holds for the
	// connection, not yet written to it) among those connections. Redis closes a
	// connection whose omem passes the pubsub class of client-output-buffer-limit,
	// which is per connection, so the largest is the one to compare with it.
	MaxOutputBuffer int64
	// Memory is the sum of their total memory (tot-mem: output and query buffers
	// and the connection's own structures), bytes.
	Memory int64
}

// Clients reports the last sample of the log's own subscriber connections. The log
// samples every ClientsInterval, in the background, never on a call's path.
func (l *RedisLog) Clients() RedisClients {
	l.clients.mu.Lock()
	defer l.clients.mu.Unlock()
	return l.clients.last
}

// clientSampler holds the last sample and whether CLIENT LIST was refused.
type clientSampler struct {
	mu       sync.Mutex
	last     RedisClients
	refused  bool     // the last answers were NOPERM; logged once per refusal streak
	owners   []string // the last slot owners read, for a sample that cannot read them
	attempts uint64   // samples taken, for tests
}

// sampleClients samples every ClientsInterval until Close, once the log is
// connected (NewRedisLog takes the first sample of a log connected at start). Each
// sample costs one CLIENT LIST TYPE pubsub per node, on a pooled connection of that
// node's (one more connection per node, idle between samples), and, on a cluster
// with a room subscribed, one CLUSTER SLOTS.
func (l *RedisLog) sampleClients() {
	tick := time.NewTicker(l.cfg.ClientsInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-l.life.Done():
			return
		}
		if !l.connected.Load() {
			continue
		}
		l.sample()
	}
}

// sample takes one sample and keeps it: Clients reports it from then on.
func (l *RedisLog) sample() {
	ctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
	s, refused, err := l.sampleOnce(ctx)
	cancel()
	if l.life.Err() != nil {
		return
	}
	l.clients.mu.Lock()
	was := l.clients.refused
	// No node answered: whether CLIENT LIST is refused is unknown, so that stays
	// as it was.
	if s.Nodes > 0 || refused {
		l.clients.refused = refused
	}
	if l.clients.refused {
		s = RedisClients{}
	}
	l.clients.last = s
	l.clients.attempts++
	now := l.clients.refused
	l.clients.mu.Unlock()
	switch {
	case now && !was:
		l.cfg.Logger.Warn("redis refuses CLIENT LIST to the gateway's user: no gauges of its own connections (grant +client|list: deploy/README.md, Redis ACL)", "err", err)
	case err != nil && !refused:
		l.cfg.Logger.Debug("redis client sample incomplete", "err", err)
	}
}

// sampleOnce asks every node the client knows for its pubsub connections and keeps
// the log's own. refused reports that every node that answered refused CLIENT LIST
// (NOPERM); err is the first other failure (a node that did not answer, slot owners
// unknown), and the sample then counts what the others said, each node that should
// hold a subscription and did not answer as down.
func (l *RedisLog) sampleOnce(ctx context.Context) (s RedisClients, refused bool, err error) {
	want, err := l.subscriberNodes(ctx)
	nodes := l.client.Nodes()
	type answer struct {
		addr string
		conns
		err error
	}
	answers := make(chan answer, len(nodes))
	for addr, n := range nodes {
		go func() {
			c, err := l.listOwn(ctx, n)
			answers <- answer{addr: addr, conns: c, err: err}
		}()
	}
	denied := 0
	live := make(map[string]bool, len(nodes))
	for range nodes {
		a := <-answers
		switch {
		case a.err == nil:
		case isNoPerm(a.err):
			denied++
			continue
		default:
			if err == nil {
				err = fmt.Errorf("%s: %w", a.addr, a.err)
			}
			continue
		}
		s.Nodes++
		s.Up += a.n
		s.Memory += a.mem
		s.MaxOutputBuffer = max(s.MaxOutputBuffer, a.omem)
		live[a.addr] = a.n > 0
	}
	s.At = time.Now()
	if denied > 0 && s.Nodes == 0 {
		return RedisClients{At: s.At}, true, err
	}
	s.Sampled = true
	for addr := range want {
		if !live[addr] {
			s.Down++
		}
	}
	return s, false, err
}

// subscriberNodes returns the addresses of the nodes that should hold a
// subscription of the log's: on a cluster the owners of the subscribed rooms'
// slots (read afresh, CLUSTER SLOTS), on a standalone server the server, while any
// room is subscribed.
func (l *RedisLog) subscriberNodes(ctx context.Context) (map[string]bool, error) {
	l.mu.Lock()
	channels := make([]string, 0, len(l.subs))
	for _, s := range l.subs {
		channels = append(channels, s.channel)
	}
	l.mu.Unlock()
	want := make(map[string]bool)
	if len(channels) == 0 {
		return want, nil
	}
	if l.client.Mode() != rueidis.ClientModeCluster {
		for addr := range l.client.Nodes() {
			want[addr] = true
		}
		return want, nil
	}
	owners, err := l.readSlotOwners(ctx)
	l.clients.mu.Lock()
	if err == nil {
		l.clients.owners = owners
	} else {
		owners = l.clients.owners // the last known, while a node is down
	}
	l.clients.mu.Unlock()
	if owners == nil {
		return want, err
	}
	for _, ch := range channels {
		cmd := l.client.B().Ssubscribe().Channel(ch).Build()
		if o := owners[cmd.Slot()]; o != "" {
			want[o] = true
		}
	}
	return want, err
}

// conns sums one node's connections of the log's.
type conns struct {
	n         int   // with a subscription
	omem, mem int64 // largest omem; sum of tot-mem
}

// listOwn reads one node's pubsub connections and sums those named as the log's
// connections with at least one subscription. It asks on a connection of the
// node's pool, never on the pipelined connections that carry the subscriptions:
// a stalled subscriber connection, the case worth seeing, would hold the question
// behind it.
func (l *RedisLog) listOwn(ctx context.Context, n rueidis.Client) (conns, error) {
	var text string
	err := n.Dedicated(func(c rueidis.DedicatedClient) error {
		var err error
		text, err = c.Do(ctx, c.B().ClientList().TypePubsub().Build()).ToString()
		return err
	})
	if err != nil {
		return conns{}, err
	}
	if len(text) > maxClientListBytes {
		text = text[:maxClientListBytes]
	}
	return parseClientList(text, l.cfg.clientName), nil
}

// parseClientList sums the connections named name with a subscription, in CLIENT
// LIST's answer: one line per connection of space-separated field=value pairs. A
// line or a field that does not parse is skipped: the answer is input.
func parseClientList(text, name string) conns {
	var c conns
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		var (
			subs      int64
			omem, mem int64
			named     bool
		)
		for f := range strings.SplitSeq(line, " ") {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			switch k {
			case "name":
				named = v == name
			case "sub", "psub", "ssub":
				if x, err := strconv.ParseInt(v, 10, 64); err == nil && x > 0 {
					subs += x
				}
			case "omem":
				omem, _ = strconv.ParseInt(v, 10, 64)
			case "tot-mem":
				mem, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if !named || subs == 0 {
			continue
		}
		c.n++
		c.omem = max(c.omem, max(omem, 0))
		c.mem += max(mem, 0)
	}
	return c
}

// isNoPerm reports Redis refusing a command to the user (ACL).
func isNoPerm(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOPERM")
}
