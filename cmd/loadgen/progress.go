package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress bar modes (-bar).
const (
	barAuto = "auto" // a bar when stderr is a terminal, else lines
	barOn   = "on"
	barOff  = "off"
)

// barWidth is the number of cells in the bar's gauge.
const barWidth = 20

// progressPrinter writes the progress to stderr until stopped: every -progress
// interval either one status line, or, with the bar, one line redrawn in place
// (carriage return, no newline until the end). With -report-every it also writes a
// periodic report line (the soak scenario's), above the bar when there is one.
type progressPrinter struct {
	out      io.Writer
	ls       *loadState
	subs     []*subscriber
	pubs     *publishers
	bar      bool
	start    time.Time
	measured atomic.Int64 // UnixNano when measuring began, 0 before

	drawn bool // the bar has been drawn and its line not yet ended; the loop's alone

	once sync.Once
	quit chan struct{}
	done chan struct{}
}

// startProgress starts the progress goroutine; with neither an interval nor a
// report interval it prints nothing.
func startProgress(out io.Writer, bar bool, ls *loadState, subs []*subscriber, pubs *publishers) *progressPrinter {
	p := &progressPrinter{out: out, ls: ls, subs: subs, pubs: pubs, bar: bar, start: time.Now(),
		quit: make(chan struct{}), done: make(chan struct{})}
	if out == nil || (ls.cfg.Progress <= 0 && ls.cfg.ReportEvery <= 0) {
		close(p.done)
		return p
	}
	go p.loop(ls.cfg.Progress, ls.cfg.ReportEvery)
	return p
}

func (p *progressPrinter) markMeasuring(t time.Time) { p.measured.Store(t.UnixNano()) }

// stop ends the goroutine and waits for it; it may be called more than once.
func (p *progressPrinter) stop() {
	p.once.Do(func() { close(p.quit) })
	<-p.done
}

// ticker returns a ticker's channel and its stop, or a nil channel for d <= 0.
func ticker(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (p *progressPrinter) loop(interval, reportEvery time.Duration) {
	defer close(p.done)
	tick, stopTick := ticker(interval)
	defer stopTick()
	report, stopReport := ticker(reportEvery)
	defer stopReport()
	last := time.Now()
	lastDel, lastPub := sumDeliveries(p.subs), sumPublished(p.pubs.rooms)
	for {
		select {
		case <-p.quit:
			if p.drawn {
				fmt.Fprintln(p.out)
			}
			return
		case now := <-tick:
			del, pub := sumDeliveries(p.subs), sumPublished(p.pubs.rooms)
			secs := now.Sub(last).Seconds()
			pubRate, delRate := float64(pub-lastPub)/secs, float64(del-lastDel)/secs
			if p.bar {
				p.drawBar(now, pubRate, delRate)
			} else {
				p.line(now, pubRate, delRate)
			}
			last, lastDel, lastPub = now, del, pub
		case now := <-report:
			p.report(now)
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

// drawBar redraws the bar line: the gauge of the planned time, then the rates.
func (p *progressPrinter) drawBar(now time.Time, pubRate, delRate float64) {
	ls := p.ls
	total := ls.cfg.Warmup + ls.cfg.Duration
	if ls.cfg.Idle {
		total = ls.cfg.Duration
	}
	fmt.Fprintf(p.out, "\r%s  conn %d/%d  pub/s %s  del/s %s  reconn %d  errs %d\x1b[K",
		barGauge(now.Sub(p.start), total), ls.open.Load(), ls.cfg.Subs, human(pubRate), human(delRate),
		ls.reconnects.Load(), p.pubs.errTotal.Load()+ls.connectErrors.Load())
	p.drawn = true
}

// barGauge draws "[####......] elapsed/total".
func barGauge(elapsed, total time.Duration) string {
	filled := barWidth
	if total > 0 && elapsed < total {
		filled = int(int64(barWidth) * int64(elapsed) / int64(total))
	}
	return fmt.Sprintf("[%s%s] %5.1fs/%s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		elapsed.Seconds(), total)
}

// report writes the periodic report line: totals so far and the loss seen so far.
func (p *progressPrinter) report(now time.Time) {
	ls := p.ls
	name := ls.cfg.Scenario
	if name == "" {
		name = "report"
	}
	var anomalies uint64
	for _, s := range p.subs {
		anomalies += s.anomalies.Load()
	}
	prefix := ""
	if p.drawn {
		prefix = "\r\x1b[K" // over the bar, which the next tick redraws below
	}
	fmt.Fprintf(p.out, "%s%s %s: published %d (errors %d), deliveries %d, anomalies %d, reconnects %d, connected %d/%d, p99 %s\n",
		prefix, name, now.Sub(p.start).Round(time.Second), sumPublished(p.pubs.rooms), p.pubs.errTotal.Load(),
		sumDeliveries(p.subs), anomalies, ls.reconnects.Load(), ls.open.Load(), ls.cfg.Subs, p.p99())
	p.drawn = false
}

// p99 merges every subscriber's histogram; it runs once per interval.
func (p *progressPrinter) p99() string {
	l := mergeLatencies(p.subs)
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
