package gatewaytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxMetricsBytes bounds one scrape.
const maxMetricsBytes = 16 << 20

// Metrics is one scrape of a Prometheus text exposition: each sample's value under
// its name and labels as the exposition writes them, labels sorted by name:
// `roomcast_streams_closed_total{reason="drain"}`, `roomcast_streams_open`. A
// histogram contributes its _bucket (with le), _sum and _count samples.
type Metrics map[string]float64

// Value returns the sample of name with the given labels, passed as name, value
// pairs in any order; 0 when there is none.
func (m Metrics) Value(name string, labels ...string) float64 {
	return m[SampleKey(name, labels...)]
}

// Sum returns the sum of every sample of name, whatever its labels.
func (m Metrics) Sum(name string) float64 {
	var n float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			n += v
		}
	}
	return n
}

// SampleKey is the key of a sample in Metrics: labels come as name, value pairs.
func SampleKey(name string, labels ...string) string {
	if len(labels) < 2 {
		return name
	}
	pairs := make([][2]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, [2]string{labels[i], labels[i+1]})
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p[0])
		b.WriteString("=")
		b.WriteString(strconv.Quote(p[1]))
	}
	b.WriteByte('}')
	return b.String()
}

// ParseMetrics reads a Prometheus text exposition with prometheus/common's parser.
func ParseMetrics(r io.Reader) (Metrics, error) {
	fams, err := parseFamilies(r)
	if err != nil {
		return nil, err
	}
	return samples(fams), nil
}

func parseFamilies(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, maxMetricsBytes))
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: parse metrics: %w", err)
	}
	return fams, nil
}

func samples(fams map[string]*dto.MetricFamily) Metrics {
	out := Metrics{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, 2*len(m.GetLabel())+2)
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName(), l.GetValue())
			}
			addSamples(out, name, f.GetType(), m, labels)
		}
	}
	return out
}

func addSamples(out Metrics, name string, typ dto.MetricType, m *dto.Metric, labels []string) {
	switch typ {
	case dto.MetricType_COUNTER:
		out[SampleKey(name, labels...)] = m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		out[SampleKey(name, labels...)] = m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		out[SampleKey(name+"_sum", labels...)] = h.GetSampleSum()
		out[SampleKey(name+"_count", labels...)] = float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
			out[SampleKey(name+"_bucket", append(labels, "le", le)...)] = float64(b.GetCumulativeCount())
		}
		out[SampleKey(name+"_bucket", append(labels, "le", "+Inf")...)] = float64(h.GetSampleCount())
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		out[SampleKey(name+"_sum", labels...)] = s.GetSampleSum()
		out[SampleKey(name+"_count", labels...)] = float64(s.GetSampleCount())
		for _, q := range s.GetQuantile() {
			qs := strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)
			out[SampleKey(name, append(labels, "quantile", qs)...)] = q.GetValue()
		}
	default:
		out[SampleKey(name, labels...)] = m.GetUntyped().GetValue()
	}
}

// Scrape fetches url (an admin listener's /metrics) with hc and parses it.
func Scrape(ctx context.Context, hc *http.Client, url string) (Metrics, error) {
	fams, err := fetchFamilies(ctx, hc, url)
	if err != nil {
		return nil, err
	}
	return samples(fams), nil
}

// fetchFamilies fetches url (a /metrics) with hc and parses its metric families.
func fetchFamilies(ctx context.Context, hc *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: scrape %s: %w", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("gatewaytest: scrape %s: status %d", url, res.StatusCode)
	}
	fams, err := parseFamilies(res.Body)
	if err != nil {
		return nil, fmt.Errorf("gatewaytest: scrape %s: %w", url, err)
	}
	return fams, nil
}
