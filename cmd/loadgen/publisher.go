package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roomcast/roomcast/gateway/gatewaytest"
)

// publishTimeout bounds one publish request.
const publishTimeout = 10 * time.Second

// maxResponseBytes bounds how much of a publish response is read.
const maxResponseBytes = 1 << 20

// publishers is the pool that publishes at the configured rate. Publish n (counted
// from 0 over the whole run) goes to room n%R and is due at start + n/rate; workers
// take numbers from one counter, so the rate holds whatever their number.
type publishers struct {
	cfg     *Config
	client  *http.Client
	pods    *pods // nil: the one pod of cfg.URL
	rooms   []*room
	byName  map[string]*room
	padding []byte
	start   time.Time
	// interval between two publishes; 0 means unpaced.
	interval time.Duration

	next     atomic.Int64 // next publish number to take
	errTotal atomic.Int64

	mu     sync.Mutex
	errors map[string]int64 // by HTTP status or failure kind
}

func newPublishers(cfg *Config, client *http.Client, rooms []*room) *publishers {
	p := &publishers{
		cfg:     cfg,
		client:  client,
		rooms:   rooms,
		byName:  make(map[string]*room, len(rooms)),
		padding: bytes.Repeat([]byte("x"), cfg.BodySize),
		errors:  make(map[string]int64),
	}
	for _, r := range rooms {
		p.byName[r.name] = r
	}
	if cfg.Rate > 0 {
		p.interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	return p
}

// run starts the workers and returns when stop is closed or MaxEvents are taken; ctx
// ends requests in flight (an interrupted run).
func (p *publishers) run(ctx context.Context, stop <-chan struct{}) {
	p.start = time.Now()
	var wg sync.WaitGroup
	for range p.cfg.Publishers {
		wg.Go(func() { p.worker(ctx, stop) })
	}
	wg.Wait()
}

func (p *publishers) worker(ctx context.Context, stop <-chan struct{}) {
	k := int64(p.cfg.Batch)
	var body, resp []byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n := p.next.Add(k) - k
		if n >= p.cfg.MaxEvents {
			return
		}
		count := min(k, p.cfg.MaxEvents-n)
		if p.interval > 0 {
			due := p.start.Add(time.Duration(n+count-1) * p.interval)
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		if p.cfg.Batch > 1 {
			body, resp = p.publishBatch(ctx, n, count, body, resp)
		} else {
			body, resp = p.publishOne(ctx, p.rooms[n%int64(len(p.rooms))], body, resp)
		}
	}
}

// appendBody appends one published body: the send time and the padding.
func (p *publishers) appendBody(dst []byte, now time.Time) []byte {
	dst = append(dst, `{"t":`...)
	dst = strconv.AppendInt(dst, now.UnixNano(), 10)
	dst = append(dst, `,"p":"`...)
	dst = append(dst, p.padding...)
	return append(dst, `"}`...)
}

// publishOne sends one POST /rooms/{room}/events; it returns its buffers for reuse.
func (p *publishers) publishOne(ctx context.Context, r *room, body, buf []byte) ([]byte, []byte) {
	centrifugo := p.cfg.Protocol == protocolCentrifugo
	want := http.StatusCreated
	if centrifugo {
		body = p.appendCentrifugoPublish(body[:0], r.name, time.Now())
		want = http.StatusOK
	} else {
		body = p.appendBody(body[:0], time.Now())
	}
	status, buf, err := p.post(ctx, p.pods.url(p.pods.publishPod(), r.pubPath, r.publishURL), body, buf)
	switch {
	case err != nil:
		p.fail("transport", 1)
	case status != want:
		p.fail(strconv.Itoa(status), 1)
	default:
		seq, ok := gatewaytest.UintAfter(buf, keySeq)
		if centrifugo {
			seq, ok = centrifugoOffset(buf)
		}
		if !ok {
			p.fail("bad_response", 1)
			break
		}
		r.acknowledge(seq)
	}
	return body, buf
}

// batchItem is one element of a POST /events answer.
type batchItem struct {
	Room   string          `json:"room"`
	Seq    *uint64         `json:"seq"`
	Status int             `json:"status"`
	Error  json.RawMessage `json:"error"`
}

// publishBatch sends events n..n+count-1 in one POST /events.
func (p *publishers) publishBatch(ctx context.Context, n, count int64, body, buf []byte) ([]byte, []byte) {
	now := time.Now()
	body = append(body[:0], '[')
	for i := range count {
		if i > 0 {
			body = append(body, ',')
		}
		r := p.rooms[(n+i)%int64(len(p.rooms))]
		body = append(body, `{"room":"`...)
		body = append(body, r.name...)
		if p.cfg.Type != "" {
			body = append(body, `","type":"`...)
			body = append(body, p.cfg.Type...)
		}
		if p.cfg.TTL != "" {
			body = append(body, `","ttl":"`...)
			body = append(body, p.cfg.TTL...)
		}
		body = append(body, `","body":`...)
		body = p.appendBody(body, now)
		body = append(body, '}')
	}
	body = append(body, ']')
	status, buf, err := p.post(ctx, p.pods.url(p.pods.publishPod(), "/events", p.cfg.URL+"/events"), body, buf)
	switch {
	case err != nil:
		p.fail("transport", count)
		return body, buf
	case status != http.StatusOK && status != http.StatusCreated && status != http.StatusMultiStatus:
		p.fail(strconv.Itoa(status), count)
		return body, buf
	}
	var items []batchItem
	if err := json.Unmarshal(buf, &items); err != nil {
		p.fail("bad_response", count)
		return body, buf
	}
	for _, it := range items {
		r := p.byName[it.Room]
		switch {
		case len(it.Error) > 0 && string(it.Error) != "null", it.Status >= 300:
			p.fail("item_"+strconv.Itoa(it.Status), 1)
		case it.Seq == nil || r == nil:
			p.fail("bad_response", 1)
		default:
			r.acknowledge(*it.Seq)
		}
	}
	if missing := count - int64(len(items)); missing > 0 {
		p.fail("bad_response", missing)
	}
	return body, buf
}

// post sends body and reads the answer into buf.
func (p *publishers) post(ctx context.Context, url string, body, buf []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, buf, fmt.Errorf("publish %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if p.cfg.TTL != "" {
		req.Header.Set("Event-TTL", p.cfg.TTL)
	}
	if p.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.cfg.Token)
	}
	if p.cfg.APIKey != "" {
		req.Header.Set("X-API-Key", p.cfg.APIKey)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, buf, fmt.Errorf("publish %s: %w", url, err)
	}
	defer resp.Body.Close()
	b := bytes.NewBuffer(buf[:0])
	if _, err := b.ReadFrom(io.LimitReader(resp.Body, maxResponseBytes)); err != nil {
		return 0, b.Bytes(), fmt.Errorf("publish %s: read answer: %w", url, err)
	}
	return resp.StatusCode, b.Bytes(), nil
}

func (p *publishers) fail(kind string, n int64) {
	p.errTotal.Add(n)
	p.mu.Lock()
	p.errors[kind] += n
	p.mu.Unlock()
}

// errorCounts returns a copy of the error counts.
func (p *publishers) errorCounts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.errors))
	for k, v := range p.errors {
		out[k] = v
	}
	return out
}
