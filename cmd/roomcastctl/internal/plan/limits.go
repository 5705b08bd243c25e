package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// maxLimitsBytes bounds a limits file: a loadgen report is a few KiB.
const maxLimitsBytes = 4 << 20

// Limits are one pod's limits, as a cmd/loadgen -json report measured them. A nil
// field is one the report does not have (or has as 0): unknown, never guessed.
type Limits struct {
	// Source names where they came from ("" when there is no limits file).
	Source   string `json:"source,omitempty"`
	Scenario string `json:"scenario,omitempty"`
	// DeliveriesPerSec is the event frames per second the pod wrote to streams.
	DeliveriesPerSec *float64 `json:"deliveries_per_sec"`
	// EgressBytesPerSec is the bytes per second its subscribers read.
	EgressBytesPerSec *float64 `json:"egress_bytes_per_sec"`
	// RSSPerConnKiB is the pod's resident memory per open stream.
	RSSPerConnKiB *float64 `json:"rss_per_conn_kib"`
	// Subscribers is the streams the run held; P99ms its p99 latency.
	Subscribers *int     `json:"subscribers"`
	P99ms       *float64 `json:"p99_ms"`
}

// missing says why a limit named by its report field is unknown.
func (l Limits) missing(field string) string {
	if l.Source == "" {
		return "no --limits file"
	}
	return "the limits file has no " + field
}

// ErrLimits marks a limits file that is not a loadgen report.
var ErrLimits = errors.New("plan: not a loadgen -json report")

// DecodeLimits reads a cmd/loadgen -json report (at most 4 MiB): one JSON object.
// Fields it does not use are ignored; the ones it uses must be finite, non-negative
// numbers where present; a 0 counts as absent (an idle run delivers nothing).
func DecodeLimits(r io.Reader) (Limits, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxLimitsBytes+1))
	if err != nil {
		return Limits{}, fmt.Errorf("plan: read limits: %w", err)
	}
	if len(data) > maxLimitsBytes {
		return Limits{}, fmt.Errorf("%w: larger than %d bytes", ErrLimits, maxLimitsBytes)
	}
	var raw struct {
		Scenario          *string  `json:"scenario"`
		DeliveriesPerSec  *float64 `json:"deliveries_per_sec"`
		EgressBytesPerSec *float64 `json:"egress_bytes_per_sec"`
		RSSPerConnKiB     *float64 `json:"rss_per_conn_kib"`
		Subscribers       *float64 `json:"subscribers"`
		P99ms             *float64 `json:"p99_ms"`
		Pods              *int     `json:"pods"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Limits{}, fmt.Errorf("%w: not a JSON object", ErrLimits)
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return Limits{}, fmt.Errorf("%w: %v", ErrLimits, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Limits{}, fmt.Errorf("%w: more than one JSON value", ErrLimits)
	}
	if raw.Pods != nil && *raw.Pods > 1 {
		// Its figures are the sum over its pods, not one pod's limits.
		return Limits{}, fmt.Errorf("%w: a run against %d pods; the limits are one pod's: run loadgen against one", ErrLimits, *raw.Pods)
	}
	var l Limits
	if raw.Scenario != nil {
		if len(*raw.Scenario) > 64 {
			return Limits{}, fmt.Errorf("%w: scenario name longer than 64 bytes", ErrLimits)
		}
		l.Scenario = *raw.Scenario
	}
	for _, f := range []struct {
		name string
		in   *float64
		out  **float64
	}{
		{"deliveries_per_sec", raw.DeliveriesPerSec, &l.DeliveriesPerSec},
		{"egress_bytes_per_sec", raw.EgressBytesPerSec, &l.EgressBytesPerSec},
		{"rss_per_conn_kib", raw.RSSPerConnKiB, &l.RSSPerConnKiB},
		{"p99_ms", raw.P99ms, &l.P99ms},
	} {
		if f.in == nil {
			continue
		}
		v := *f.in
		if v < 0 || v > 1e15 || math.IsNaN(v) {
			return Limits{}, fmt.Errorf("%w: %s is %g", ErrLimits, f.name, v)
		}
		if v > 0 {
			*f.out = &v
		}
	}
	if s := raw.Subscribers; s != nil {
		if *s < 0 || *s > 1e12 || *s != math.Trunc(*s) {
			return Limits{}, fmt.Errorf("%w: subscribers is %g", ErrLimits, *s)
		}
		if *s > 0 {
			n := int(*s)
			l.Subscribers = &n
		}
	}
	return l, nil
}
