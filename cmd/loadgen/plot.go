package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The plots' files (-plot DIR), in the order writePlots writes them.
const (
	plotDeliveries = "deliveries-per-second.png"
	plotLatency    = "latency.png"
	plotReconnects = "reconnects.png"
)

var plotFiles = []string{plotDeliveries, plotLatency, plotReconnects}

// Every plot is plotWidthPx × plotHeightPx pixels.
const (
	plotDPI      = 100
	plotWidthPx  = 1000
	plotHeightPx = 500
)

var (
	colourBlue   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colourOrange = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colourRed    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// series is one line of a plot.
type series struct {
	name   string
	colour color.Color
	y      func(TimelinePoint) float64
}

// writePlots draws the timeline into dir (created if missing): deliveries per
// second, p50 and p99 latency, and reconnects per second, each over the seconds of
// the measured window.
func writePlots(dir, scenario string, tl []TimelinePoint) error {
	if len(tl) == 0 {
		return errors.New("plot: the timeline is empty (no measured window)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	title := func(s string) string {
		if scenario == "" {
			return "loadgen: " + s
		}
		return "loadgen " + scenario + ": " + s
	}
	plots := []struct {
		file, title, unit string
		lines             []series
	}{
		{plotDeliveries, title("deliveries per second"), "deliveries/s",
			[]series{{"deliveries/s", colourBlue, func(p TimelinePoint) float64 { return p.DeliveriesPerSec }}}},
		{plotLatency, title("publish-to-deliver latency"), "ms",
			[]series{
				{"p50", colourBlue, func(p TimelinePoint) float64 { return p.P50ms }},
				{"p99", colourOrange, func(p TimelinePoint) float64 { return p.P99ms }},
			}},
		{plotReconnects, title("reconnects per second"), "reconnects/s",
			[]series{{"reconnects/s", colourRed, func(p TimelinePoint) float64 { return float64(p.Reconnects) }}}},
	}
	for _, pl := range plots {
		if err := drawPlot(filepath.Join(dir, pl.file), pl.title, pl.unit, tl, pl.lines); err != nil {
			return err
		}
	}
	return nil
}

// niceCeil returns the smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten
// that is at least v, and 1 for v <= 0 (an all-zero series still gets an axis).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8} {
		if f*e >= v {
			return f * e
		}
	}
	return 10 * e
}

// drawPlot draws lines over the timeline into the PNG file path.
func drawPlot(path, title, unit string, tl []TimelinePoint, lines []series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds into the measured window"
	p.Y.Label.Text = unit
	p.Add(plotter.NewGrid())
	for _, s := range lines {
		// A point holds over the interval it closes: a step before it, and the
		// first interval drawn from 0.
		xys := make(plotter.XYs, len(tl)+1)
		xys[0].Y = s.y(tl[0])
		for i, pt := range tl {
			xys[i+1].X, xys[i+1].Y = pt.T, s.y(pt)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
		}
		l.StepStyle = plotter.PreStep
		l.Color = s.colour
		l.Width = vg.Points(2)
		p.Add(l)
		if len(lines) > 1 {
			p.Legend.Add(s.name, l)
		}
	}
	p.Legend.Top = true
	p.X.Min = 0
	p.Y.Min = 0
	p.Y.Max = niceCeil(p.Y.Max) // room above the highest point, and round ticks
	c := vgimg.NewWith(
		vgimg.UseWH(vg.Length(plotWidthPx)*vg.Inch/plotDPI, vg.Length(plotHeightPx)*vg.Inch/plotDPI),
		vgimg.UseDPI(plotDPI))
	pad := vg.Points(8)
	p.Draw(draw.Crop(draw.New(c), pad, -pad, pad, -pad))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
