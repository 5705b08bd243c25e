package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// A loadgen report from before egress_bytes_per_sec and scenario existed.
const oldReport = `{"subscribers":19000,"connected":19000,"connected_at_end":19000,"connect_errors":0,
"published":12000,"publish_errors":0,"deliveries":2280000,"expected_deliveries":2280000,
"measured_seconds":20.1,"deliveries_per_sec":113432.8,"publishes_per_sec":597,
"p50_ms":3.1,"p99_ms":41.5,"p999_ms":80,"max_ms":120,"mean_ms":5,"gaps":0,"duplicates":0,
"late":0,"epoch_changes":0,"malformed":0,"resyncs":0,"reconnects":0,"lossy_subscribers":0,
"rss_before_kib":30000,"rss_after_kib":752000,"rss_per_conn_kib":38}`

func TestDecodeLimitsOldReport(t *testing.T) {
	l, err := DecodeLimits(strings.NewReader(oldReport))
	if err != nil {
		t.Fatal(err)
	}
	if *l.DeliveriesPerSec != 113432.8 || *l.RSSPerConnKiB != 38 || *l.Subscribers != 19000 || *l.P99ms != 41.5 {
		t.Errorf("%+v", l)
	}
	if l.EgressBytesPerSec != nil || l.Scenario != "" {
		t.Errorf("egress %v, scenario %q: the report has neither", l.EgressBytesPerSec, l.Scenario)
	}
	l.Source = "old.json"
	p, err := Compute(baseInputs(), l)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Resources {
		if r.Name == PodEgress && r.Unknown != "the limits file has no egress_bytes_per_sec" {
			t.Errorf("pod egress: %+v", r)
		}
		if r.Name == PodStreams && r.Unknown != "no --pod-memory" {
			t.Errorf("pod streams: %+v", r)
		}
	}
}

func TestDecodeLimitsNewFields(t *testing.T) {
	l, err := DecodeLimits(strings.NewReader(`{"scenario":"fanout","egress_bytes_per_sec":5.5e7,"deliveries_per_sec":0,
		"timeline":[{"t":1,"deliveries_per_sec":5}],"idle":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if l.Scenario != "fanout" || *l.EgressBytesPerSec != 5.5e7 {
		t.Errorf("%+v", l)
	}
	if l.DeliveriesPerSec != nil {
		t.Errorf("deliveries_per_sec 0 taken as a limit: %v", *l.DeliveriesPerSec)
	}
}

func TestDecodeLimitsRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":               ``,
		"array":               `[{"deliveries_per_sec":1}]`,
		"two objects":         `{} {}`,
		"trailing garbage":    `{}x`,
		"negative":            `{"deliveries_per_sec":-1}`,
		"string":              `{"rss_per_conn_kib":"38"}`,
		"fractional streams":  `{"subscribers":1.5}`,
		"huge":                `{"egress_bytes_per_sec":1e300}`,
		"long scenario":       `{"scenario":"` + strings.Repeat("s", 65) + `"}`,
		"unterminated":        `{"deliveries_per_sec":1`,
		"larger than 4 MiB":   `{"x":"` + strings.Repeat("a", maxLimitsBytes) + `"}`,
		"a number not object": `42`,
		"several pods":        `{"pods":3,"deliveries_per_sec":1000}`,
	} {
		if _, err := DecodeLimits(strings.NewReader(in)); !errors.Is(err, ErrLimits) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzLimits(f *testing.F) {
	f.Add([]byte(oldReport))
	f.Add([]byte(`{"scenario":"storm","egress_bytes_per_sec":1e6,"subscribers":0}`))
	f.Add([]byte(`{"deliveries_per_sec":null,"p99_ms":-0}`))
	f.Add([]byte(`{"subscribers":1e12}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := DecodeLimits(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrLimits) {
				t.Fatalf("error not marked: %v", err)
			}
			return
		}
		for _, v := range []*float64{l.DeliveriesPerSec, l.EgressBytesPerSec, l.RSSPerConnKiB, l.P99ms} {
			if v != nil && !(*v > 0 && *v <= 1e15) {
				t.Fatalf("limit %v out of bounds", *v)
			}
		}
		if l.Subscribers != nil && *l.Subscribers <= 0 {
			t.Fatalf("subscribers %d", *l.Subscribers)
		}
		if len(l.Scenario) > 64 {
			t.Fatalf("scenario of %d bytes", len(l.Scenario))
		}
		// What it decoded plans without error and encodes as JSON.
		l.Source = "fuzz.json"
		in := baseInputs()
		in.PodMemory = 1 << 30
		p, err := Compute(in, l)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Resources {
			if r.Utilisation != nil && (math.IsNaN(*r.Utilisation) || math.IsInf(*r.Utilisation, 0)) {
				t.Fatalf("%s utilisation %v", r.Name, *r.Utilisation)
			}
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatal(err)
		}
	})
}
