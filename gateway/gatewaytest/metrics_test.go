package gatewaytest

import (
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	in := `# HELP roomcast_streams_closed_total Streams closed, by reason.
# TYPE roomcast_streams_closed_total counter
roomcast_streams_closed_total{reason="drain"} 3
roomcast_streams_closed_total{reason="slow"} 1
# TYPE roomcast_streams_open gauge
roomcast_streams_open 7
# TYPE roomcast_x_seconds histogram
roomcast_x_seconds_bucket{op="a",le="0.5"} 2
roomcast_x_seconds_bucket{op="a",le="+Inf"} 4
roomcast_x_seconds_sum{op="a"} 3.5
roomcast_x_seconds_count{op="a"} 4
# TYPE two_labels counter
two_labels{z="1",a="2"} 5
`
	m, err := ParseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"counter by label", m.Value("roomcast_streams_closed_total", "reason", "drain"), 3},
		{"counter key as written", m[`roomcast_streams_closed_total{reason="slow"}`], 1},
		{"sum over labels", m.Sum("roomcast_streams_closed_total"), 4},
		{"gauge", m.Value("roomcast_streams_open"), 7},
		{"histogram bucket", m.Value("roomcast_x_seconds_bucket", "op", "a", "le", "0.5"), 2},
		{"histogram count", m.Value("roomcast_x_seconds_count", "op", "a"), 4},
		{"histogram sum", m.Value("roomcast_x_seconds_sum", "op", "a"), 3.5},
		{"labels sorted", m[`two_labels{a="2",z="1"}`], 5},
		{"absent", m.Value("roomcast_streams_closed_total", "reason", "nope"), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if _, err := ParseMetrics(strings.NewReader("roomcast_bad{ 1\n")); err == nil {
		t.Error("a broken exposition parsed")
	}
}
