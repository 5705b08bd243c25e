package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/polltest"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

// subscriberAlert is the rule on the pods' own series that fires when Redis closed
// a pod's subscriber connection.
const subscriberAlert = "RoomcastRedisSubscriberReconnected"

// TestFleetOutputBufferDisconnect forces the pubsub output-buffer limit on a real
// Redis: two gateway processes share a standalone server whose limit is 64 KiB
// (32 KiB for 1 s); members follow three rooms on pod B; pod B is stopped
// (SIGSTOP) while pod A publishes 32 KiB events until Redis has closed every
// connection of B's that held a room's subscription (no subscriber left on any room
// channel, and the server's log names B's connection and the output-buffer limit).
// Pod B continues (SIGCONT): it resubscribes (roomcast_redis_resubscribes_total
// rises, its subscriber connection counts up again), repairs the rooms from the log,
// and every member gets every acknowledged event once, in order. A real Prometheus
// scrapes pod B every second with the rule of alerts.yaml, and the alert fires.
func TestFleetOutputBufferDisconnect(t *testing.T) {
	promBin, err := prometheusBinary("prometheus", "ROOMCAST_PROMETHEUS")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI=true requires the forced output-buffer disconnect test to run", err)
		}
		t.Skip(err)
	}
	srv := redistest.Standalone(t)
	srv.MustDo(t, "CONFIG", "SET", "client-output-buffer-limit", "pubsub 64kb 32kb 1")
	t.Logf("idle loop %q", gatewaytest.IdleLoop(t))

	podB := "ob-b-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	common := []string{"--redis", srv.Addr, "--drain-delay", "0s", "--redis-sample-interval", "200ms",
		"--retry-min", "100ms", "--retry-max", "200ms", "--history", "5000", "--queue", "4096"}
	a := gatewaytest.Start(t, gatewaytest.Options{Name: "a", Bin: gatewayBin, Args: common})
	b := gatewaytest.Start(t, gatewaytest.Options{Name: "b", Bin: gatewayBin, Args: append([]string{"--pod-id", podB}, common...)})
	stopped := false
	t.Cleanup(func() {
		if stopped {
			_ = b.Signal(syscall.SIGCONT)
		}
	})

	prom := startPrometheus(t, promBin, b.AdminAddr())

	// Members: two per room on pod B.
	prefix := redistest.Prefix(t)
	rooms := []string{prefix + "-a", prefix + "-b", prefix + "-c"}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var audits []*gatewaytest.Audit
	for _, room := range rooms {
		for range 2 {
			au := gatewaytest.NewAudit(room, 1, true)
			audits = append(audits, au)
			opened := make(chan struct{})
			wg.Go(func() { follow(ctx, b.Public, au, opened) })
			select {
			case <-opened:
			case <-time.After(10 * time.Second):
				t.Fatalf("a member of %s on pod B: no stream within 10s", room)
			}
		}
	}
	channels := make([]string, len(rooms))
	for i, r := range rooms {
		channels[i] = "room:{" + r + "}"
	}
	replaytest.Eventually(t, 10*time.Second, "pod B subscribed to every room", func() error {
		return shardSubscribers(srv, channels, func(n int) bool { return n == 1 })
	})
	scrapeB := func() gatewaytest.Metrics {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := gatewaytest.Scrape(ctx, http.DefaultClient, b.Admin+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	const (
		resubs = "roomcast_redis_resubscribes_total"
		conns  = "roomcast_redis_subscriber_connections"
	)
	replaytest.Eventually(t, 10*time.Second, "pod B's subscriber connection up", func() bool {
		return scrapeB().Value(conns, "state", "up") >= 1
	})
	before := scrapeB().Value(resubs)
	// Quiet first: Prometheus has B's counter, and has evaluated the rule on it since.
	prom.quietSince(t, time.Now())

	if err := b.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped = true
	ledger := gatewaytest.NewLedger()
	body := []byte(`{"pad":"` + strings.Repeat("x", 32<<10) + `"}`)
	publish := func(i int) {
		t.Helper()
		room := rooms[i%len(rooms)]
		seq, err := publishTo(a.Public, room, body)
		if err != nil {
			t.Fatal(err)
		}
		ledger.Ack(room, seq)
	}
	published := 0
	for ; ; published++ {
		if published%len(rooms) == 0 && shardSubscribers(srv, channels, func(n int) bool { return n == 0 }) == nil {
			break
		}
		if published > 3000 {
			t.Fatalf("3000 events of 32 KiB published and Redis still holds pod B's subscriptions: %v",
				shardSubscribers(srv, channels, func(n int) bool { return n == 0 }))
		}
		publish(published)
	}
	closedAt := published
	// Some more, which only the log holds for B.
	for end := published + 10*len(rooms); published < end; published++ {
		publish(published)
	}
	logText, err := os.ReadFile(srv.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(logText, []byte("name=roomcast:"+podB)) || !bytes.Contains(logText, []byte("output buffer limits")) {
		t.Fatalf("the server's log names no connection roomcast:%s closed for its output buffer:\n%s", podB, tail(logText, 3000))
	}
	t.Logf("Redis closed pod B's subscriber connections after %d events of 32 KiB; %d published in all while B was stopped", closedAt, published)

	continued := time.Now()
	if err := b.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	replaytest.Eventually(t, 20*time.Second, "pod B resubscribed", func() bool { return scrapeB().Value(resubs) > before })
	t.Logf("SIGCONT to resubscribes_total rising (polled): %s", time.Since(continued).Round(time.Millisecond))
	replaytest.Eventually(t, 20*time.Second, "pod B's subscriber connection counted up again", func() bool {
		m := scrapeB()
		return m.Value(conns, "state", "up") >= 1 && m.Value(conns, "state", "down") == 0
	})
	if err := shardSubscribers(srv, channels, func(n int) bool { return n == 1 }); err != nil {
		t.Errorf("after the resubscribe: %v", err)
	}

	ledger.Settle(t, audits, 30*time.Second)
	loss := ledger.Check(t, audits)
	t.Logf("members: %s", loss)
	if loss.Acked != published || loss.Missing != 0 || loss.Duplicate != 0 || loss.Phantom != 0 {
		t.Errorf("published %d: %s", published, loss)
	}

	prom.waitFiring(t, b.AdminAddr())
}

// follow reads room's stream on pod base into au until ctx ends, reconnecting from
// its last position whenever the stream ends, as an EventSource does; opened is
// closed once the first stream answered 200.
func follow(ctx context.Context, base string, au *gatewaytest.Audit, opened chan struct{}) {
	var once sync.Once
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/rooms/"+au.Room()+"/events", nil)
		if err != nil {
			au.Problem("request: %v", err)
			return
		}
		if last := au.Last(); last.Epoch != "" {
			req.Header.Set("Last-Event-ID", last.String())
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			au.Note("connect: " + err.Error())
			// Wait out a retry: hint, as an EventSource does.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if res.StatusCode != http.StatusOK {
			au.Problem("status %d", res.StatusCode)
			res.Body.Close()
			return
		}
		once.Do(func() { close(opened) })
		dec := gatewaytest.NewDecoder(bufio.NewReader(res.Body), nil)
		for {
			ev, err := dec.Next()
			if err != nil {
				au.Note("stream ended: " + err.Error())
				break
			}
			if ev.IsAnchor() || !ev.IDSet {
				continue
			}
			typ := string(ev.Type)
			if typ == "" {
				typ = "message"
			}
			au.Frame(string(ev.ID), typ)
		}
		res.Body.Close()
	}
}

// publishTo publishes body to room through the pod at base and returns its seq.
func publishTo(base, room string, body []byte) (uint64, error) {
	res, err := http.Post(base+"/rooms/"+room+"/events", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if res.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("publish to %s: %d %s", room, res.StatusCode, out)
	}
	var ack struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal(out, &ack); err != nil || ack.Seq == 0 {
		return 0, fmt.Errorf("publish to %s: %q: %v", room, out, err)
	}
	return ack.Seq, nil
}

// shardSubscribers asks Redis how many connections subscribe each channel (PUBSUB
// SHARDNUMSUB) and returns nil when ok holds for every one.
func shardSubscribers(srv *redistest.Server, channels []string, ok func(int) bool) error {
	out, err := srv.Do(append([]string{"PUBSUB", "SHARDNUMSUB"}, channels...)...)
	if err != nil {
		return err
	}
	f := strings.Fields(out)
	if len(f) != 2*len(channels) {
		return fmt.Errorf("PUBSUB SHARDNUMSUB: %q", out)
	}
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.Atoi(f[i+1])
		if err != nil {
			return fmt.Errorf("PUBSUB SHARDNUMSUB: %q", out)
		}
		if !ok(n) {
			return fmt.Errorf("%s has %d subscribers", f[i], n)
		}
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// prometheusServer is a Prometheus process on loopback.
type prometheusServer struct {
	url string
	log string // its log file
}

// startPrometheus runs Prometheus on a free loopback port, scraping target's
// /metrics every second (job roomcast) and evaluating, every second, the rule
// subscriberAlert of alerts.yaml as the file has it. It is stopped when t ends.
func startPrometheus(t *testing.T, bin, target string) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	var rules struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	raw, err := readBounded(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	var rule map[string]any
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r["alert"] == subscriberAlert {
				rule = r
			}
		}
	}
	if rule == nil {
		t.Fatalf("%s has no alert %s", alertsFile, subscriberAlert)
	}
	write := func(name string, v any) string {
		t.Helper()
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rulesFile := write("rules.yaml", map[string]any{"groups": []any{map[string]any{"name": "roomcast-test", "rules": []any{rule}}}})
	config := write("prometheus.yaml", map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{rulesFile},
		"scrape_configs": []any{map[string]any{
			"job_name":       "roomcast",
			"static_configs": []any{map[string]any{"targets": []string{target}}},
		}},
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logFile := filepath.Join(dir, "prometheus.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		lf.Close()
	})
	p := &prometheusServer{url: "http://" + addr, log: logFile}
	if err := polltest.Until(20*time.Second, func() error {
		res, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %d", res.StatusCode)
		}
		return nil
	}); err != nil {
		t.Fatalf("prometheus not ready: %v\n%s", err, p.logTail())
	}
	return p
}

func (p *prometheusServer) logTail() string {
	b, _ := os.ReadFile(p.log)
	return string(tail(b, 3000))
}

// get decodes the data of a Prometheus API answer at path into v.
func (p *prometheusServer) get(path string, v any) error {
	res, err := http.Get(p.url + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var ans struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&ans); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if ans.Status != "success" {
		return fmt.Errorf("%s: %s %s", path, ans.Status, ans.Error)
	}
	return json.Unmarshal(ans.Data, v)
}

// ruleState returns the alert rule's state and when it was last evaluated.
func (p *prometheusServer) ruleState() (string, time.Time, error) {
	var data struct {
		Groups []struct {
			Rules []struct {
				Name           string    `json:"name"`
				State          string    `json:"state"`
				Health         string    `json:"health"`
				LastError      string    `json:"lastError"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules?type=alert", &data); err != nil {
		return "", time.Time{}, err
	}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			if r.Name == subscriberAlert {
				if r.Health == "err" {
					return "", time.Time{}, fmt.Errorf("rule %s: %s", r.Name, r.LastError)
				}
				return r.State, r.LastEvaluation, nil
			}
		}
	}
	return "", time.Time{}, fmt.Errorf("no rule %s loaded", subscriberAlert)
}

// quietSince waits until Prometheus holds a sample of the resubscribes counter
// scraped after since, and has evaluated the rule after that: it must be inactive.
func (p *prometheusServer) quietSince(t *testing.T, since time.Time) {
	t.Helper()
	var scraped time.Time
	replaytest.Eventually(t, 15*time.Second, "prometheus scraped pod B's resubscribes", func() error {
		var data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		}
		if err := p.get("/api/v1/query?query="+url.QueryEscape("timestamp(roomcast_redis_resubscribes_total)"), &data); err != nil {
			return err
		}
		if len(data.Result) != 1 {
			return fmt.Errorf("%d series", len(data.Result))
		}
		s, _ := data.Result[0].Value[1].(string)
		ts, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		if scraped = time.UnixMilli(int64(ts * 1000)); scraped.Before(since) {
			return fmt.Errorf("last scraped %s, before %s", scraped, since)
		}
		return nil
	})
	replaytest.Eventually(t, 15*time.Second, "the rule evaluated after that scrape", func() error {
		state, at, err := p.ruleState()
		switch {
		case err != nil:
			return err
		case !at.After(scraped):
			return fmt.Errorf("last evaluated %s", at)
		case state != "inactive":
			t.Fatalf("%s is %s before any connection was closed", subscriberAlert, state)
		}
		return nil
	})
}

// waitFiring waits until Prometheus lists the alert firing for instance.
func (p *prometheusServer) waitFiring(t *testing.T, instance string) {
	t.Helper()
	start := time.Now()
	replaytest.Eventually(t, 30*time.Second, subscriberAlert+" firing in prometheus", func() error {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if err := p.get("/api/v1/alerts", &data); err != nil {
			return err
		}
		for _, a := range data.Alerts {
			if a.Labels["alertname"] == subscriberAlert && a.Labels["instance"] == instance && a.State == "firing" {
				return nil
			}
		}
		return fmt.Errorf("alerts %+v", data.Alerts)
	})
	t.Logf("prometheus: %s firing for %s (waited %s after the members settled)", subscriberAlert, instance, time.Since(start).Round(time.Millisecond))
}
