package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progressPrinter writes one status line per interval until stopped.
type progressPrinter struct {
	out      io.Writer
	ls       *loadState
	subs     []*subscriber
	pubs     *publishers
	start    time.Time
	measured atomic.Int64 // UnixNano when measuring began, 0 before

	once sync.Once
	quit chan struct{}
	done chan struct{}
}

// startProgress starts the progress goroutine; interval 0 prints nothing.
func startProgress(out io.Writer, interval time.Duration, ls *loadState, subs []*subscriber, pubs *publishers) *progressPrinter {
	p := &progressPrinter{out: out, ls: ls, subs: subs, pubs: pubs, start: time.Now(),
		quit: make(chan struct{}), done: make(chan struct{})}
	if interval <= 0 || out == nil {
		close(p.done)
		return p
	}
	go p.loop(interval)
	return p
}

func (p *progressPrinter) markMeasuring(t time.Time) { p.measured.Store(t.UnixNano()) }

// stop ends the goroutine and waits for it; it may be called more than once.
func (p *progressPrinter) stop() {
	p.once.Do(func() { close(p.quit) })
	<-p.done
}

func (p *progressPrinter) loop(interval time.Duration) {
	defer close(p.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := time.Now()
	lastDel, lastPub := sumDeliveries(p.subs), sumPublished(p.pubs.rooms)
	for {
		select {
		case <-p.quit:
			return
		case now := <-tick.C:
			del, pub := sumDeliveries(p.subs), sumPublished(p.pubs.rooms)
			secs := now.Sub(last).Seconds()
			p.line(now, float64(pub-lastPub)/secs, float64(del-lastDel)/secs)
			last, lastDel, lastPub = now, del, pub
		}
	}
}

func (p *progressPrinter) line(now time.Time, pubRate, delRate float64) {
	ls := p.ls
	phase := "warmup"
	if p.measured.Load() != 0 {
		phase = "p99=" + p.p99()
	}
	if ls.cfg.Idle {
		phase = "idle"
	}
	fmt.Fprintf(p.out, "%6.1fs conn=%d/%d pub/s=%s del/s=%s %s errs: pub=%d conn=%d reconn=%d\n",
		now.Sub(p.start).Seconds(), ls.open.Load(), ls.cfg.Subs, human(pubRate), human(delRate),
		phase, p.pubs.errTotal.Load(), ls.connectErrors.Load(), ls.reconnects.Load())
}

// p99 merges every subscriber's histogram; it runs once per interval.
func (p *progressPrinter) p99() string {
	var l latencies
	for _, s := range p.subs {
		if s.hist != nil {
			l.add(s.hist)
		}
	}
	if l.total == 0 {
		return "-"
	}
	return fmtMillis(l.quantile(0.99))
}

// human formats a rate with a k or M suffix.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func fmtMillis(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}
