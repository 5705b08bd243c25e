package gateway_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

func TestMetricsShowTheEmbeddedLogsRoomsAndBytes(t *testing.T) {
	p := newPod(t, podConfig{})
	p.publish(t, "one", `{"a":1}`)
	p.publish(t, "two", `{"a":1}`)
	metrics := do(t, http.MethodGet, p.admin.URL+"/metrics", "").body
	if !regexp.MustCompile(`(?m)^roomcast_log_rooms 2$`).MatchString(metrics) {
		t.Fatalf("no roomcast_log_rooms 2 in:\n%s", metrics)
	}
	m := regexp.MustCompile(`(?m)^roomcast_log_bytes (\S+)$`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("no roomcast_log_bytes in:\n%s", metrics)
	}
	_, want := p.mem.Stats()
	if got, err := strconv.ParseFloat(m[1], 64); err != nil || int64(got) != want || want <= 0 {
		t.Fatalf("roomcast_log_bytes %s, the log reports %d", m[1], want)
	}
}
