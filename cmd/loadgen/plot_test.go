package main

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkPNG fails t unless path is a PNG of the plot size whose plot area holds more
// than one colour (lines drawn over the background).
func checkPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if got := img.Bounds().Size(); got != image.Pt(plotWidthPx, plotHeightPx) {
		t.Errorf("%s is %v, want %dx%d", path, got, plotWidthPx, plotHeightPx)
	}
	// The middle of the image, away from the axes and labels.
	r := img.Bounds()
	area := image.Rect(r.Min.X+r.Dx()/5, r.Min.Y+r.Dy()/8, r.Max.X-r.Dx()/20, r.Max.Y-r.Dy()/5)
	colours := map[[4]uint32]bool{}
	for y := area.Min.Y; y < area.Max.Y; y++ {
		for x := area.Min.X; x < area.Max.X; x++ {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			colours[[4]uint32{cr, cg, cb, ca}] = true
		}
	}
	if len(colours) < 2 {
		t.Errorf("%s: the plot area has %d colour(s), want a line over the background", path, len(colours))
	}
}

func TestWritePlots(t *testing.T) {
	tl := []TimelinePoint{
		{T: 1, DeliveriesPerSec: 1000, P50ms: 1.5, P99ms: 8, Reconnects: 0},
		{T: 2, DeliveriesPerSec: 1200, P50ms: 1.2, P99ms: 12, Reconnects: 40},
		{T: 3, DeliveriesPerSec: 900, P50ms: 2.5, P99ms: 30, Reconnects: 10},
		{T: 3.5, DeliveriesPerSec: 1100, P50ms: 1.1, P99ms: 6, Reconnects: 0},
	}
	dir := filepath.Join(t.TempDir(), "plots") // created by writePlots
	if err := writePlots(dir, "fanout", tl); err != nil {
		t.Fatal(err)
	}
	for _, name := range plotFiles {
		checkPNG(t, filepath.Join(dir, name))
	}
}

func TestWritePlotsEmptyTimeline(t *testing.T) {
	err := writePlots(t.TempDir(), "", nil)
	if err == nil || !strings.Contains(err.Error(), "timeline") {
		t.Errorf("writePlots(no timeline) = %v, want an error naming the timeline", err)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct{ in, want float64 }{
		{0, 1}, {-3, 1}, {1, 1}, {26000, 30000}, {19997, 20000}, {0.7, 0.8}, {9.5, 10}, {301, 400},
	} {
		if got := niceCeil(tt.in); math.Abs(got-tt.want) > 1e-9*tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
